"""Pickling calls for a job: cloudpickle, but functions keep the file name they were defined in.

cloudpickle sends the code of functions it pickles by value (those of the caller's ``__main__``, lambdas,
closures) with the file name ``<dynamic-code>``, so a traceback raised in a job shows
``File "<dynamic-code>", line 5`` instead of the user's script. Here code objects travel in ``marshal``'s form,
which is how Python itself stores compiled code (``.pyc``): the file name and line table stay, and the
traceback names the user's file and line (with the line's text when the file is readable on the node).
"""

from __future__ import annotations

import functools
import io
import marshal
import pickle
import types
from collections import ChainMap
from typing import Any

import cloudpickle


def _code_reduce(code: types.CodeType) -> tuple[Any, ...]:
    return marshal.loads, (marshal.dumps(code),)


_OWN = {types.CodeType: _code_reduce}


class Pickler(cloudpickle.Pickler):
    """cloudpickle's pickler with code objects that keep ``co_filename``."""

    dispatch_table = ChainMap(_OWN, cloudpickle.Pickler.dispatch_table)


class _FlatPickler(Pickler):
    """:class:`Pickler` with its dispatch table as one dict (:func:`_flat_table`): a ChainMap is looked up in
    Python for every object pickled, a fifth of the time of pickling a small call."""

    #: Copies of the tables the flat one was made from (cloudpickle's, copyreg's).
    made_from: list[dict[Any, Any]] = []


def _flat_table() -> None:
    """Make :class:`_FlatPickler`'s table again when a table under it changed (``copyreg.pickle`` adding or
    replacing a reducer): the tables are compared with the copies it was made from (a dict comparison in C,
    about a microsecond for copyreg's few entries)."""
    maps = cloudpickle.Pickler.dispatch_table.maps
    if maps != _FlatPickler.made_from:
        flat: dict[Any, Any] = {}
        for table in reversed(maps):
            flat.update(table)
        flat.update(_OWN)
        _FlatPickler.dispatch_table = flat  # type: ignore[assignment]
        _FlatPickler.made_from = [dict(table) for table in maps]


class _ShippingPickler(_FlatPickler):
    """:class:`_FlatPickler` that pickles each function once per call of a front-end (``shipped``: id -> the
    function and its pickle) and puts those bytes into every pickle that holds it: a joblib call of 10,000
    ``delayed(f)`` sends ``f`` by value with each of its batches, which cost most of a batch's pickling."""

    def __init__(self, file: Any, protocol: int, shipped: dict[int, tuple[Any, bytes]]) -> None:
        super().__init__(file, protocol=protocol)
        self.shipped = shipped

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.FunctionType:
            entry = self.shipped.get(id(obj))
            if entry is None or entry[0] is not obj:
                entry = self.shipped[id(obj)] = (obj, dumps(obj, self.proto))
            return load_once, (entry[1],)
        return super().reducer_override(obj)


@functools.lru_cache(maxsize=32)
def load_once(data: bytes) -> Any:
    """The value pickled in ``data``, unpickled once per process: a function shipped with every batch of a call
    is made once on the node too."""
    return pickle.loads(data)


def dumps(value: Any, protocol: int | None = None, shipped: dict[int, tuple[Any, bytes]] | None = None) -> bytes:
    """``cloudpickle.dumps(value)``, with functions' code keeping its file name and lines; with ``shipped`` (one
    dict per call of a front-end), each function in it is pickled once (:class:`_ShippingPickler`)."""
    _flat_table()
    protocol = protocol or pickle.DEFAULT_PROTOCOL
    with io.BytesIO() as file:
        pickler = _FlatPickler(file, protocol=protocol) if shipped is None else _ShippingPickler(file, protocol, shipped)
        pickler.dump(value)
        return file.getvalue()


class Pickled:
    """A value pickled once (:func:`dumps`) to be sent in many calls: it pickles as those bytes and unpickles as
    the value, with plain ``pickle.loads`` on the node (e.g. a pool's function, sent by value with every chunk)."""

    __slots__ = ("data",)

    def __init__(self, value: Any) -> None:
        self.data = dumps(value)

    def __reduce__(self) -> tuple[Any, ...]:
        return pickle.loads, (self.data,)
