"""Pickling of calls for jobs: what is pickled once, and the pickler's own dispatch table (issue 44)."""

from __future__ import annotations

import copyreg
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest

from b2batch.calls import pickling
from b2batch.pool import chunk_on_node
from b2batch.pool.dispatch import Batch, Dispatcher


class Counted:
    """A callable that counts how often it was pickled."""

    pickled = 0

    def __call__(self, x: int) -> int:
        return 2 * x

    def __reduce__(self) -> tuple[object, ...]:
        Counted.pickled += 1
        return Counted, ()


class Late:
    """A class whose reducer is registered only after the pickler was used."""


def _seven(_value: Late) -> tuple[object, ...]:
    return int, (7,)


def _eight(_value: Late) -> tuple[object, ...]:
    return int, (8,)


def test_a_pool_call_pickles_its_function_once_for_all_its_chunks(tmp_path: Path) -> None:
    """The function (with how, mode, initializer and initargs) goes into one file of the work dir; each chunk
    names that file and its digest, and a node loads it once per process."""
    Counted.pickled = 0
    batch = Batch("map(Counted)", Counted(), "one", None, iter(()))
    dispatcher = SimpleNamespace(initializer=None, initargs=(), mode="raise", packer=SimpleNamespace(work_dir=tmp_path))
    calls = [pickling.dumps([(chunk_on_node.run_shipped_chunk, (*Dispatcher._shipped(dispatcher, batch), [i], i), {})])
             for i in range(5)]  # type: ignore[arg-type]
    assert Counted.pickled == 1 and len(list((tmp_path / "shipped").iterdir())) == 1
    assert all(len(call) < 300 for call in calls), [len(call) for call in calls]
    answers = []
    for call in calls:
        [(function, args, kwargs)] = pickle.loads(call)
        answers.append(pickle.loads(function(*args, **kwargs)).values)
    assert answers == [[0], [2], [4], [6], [8]] and Counted.pickled == 1
    path, digest = batch.shipped
    chunk_on_node._LOADED.clear()
    Path(path).write_bytes(pickle.dumps((len, "one", "raise", None, ())))  # changed since the chunk was sent
    with pytest.raises(RuntimeError, match="is not the file this chunk was sent with"):
        chunk_on_node.run_shipped_chunk(path, digest, [1], 0)


def test_a_reducer_registered_or_replaced_after_the_first_call_is_used() -> None:
    pickling.dumps([1, 2])  # the dispatch table is made
    copyreg.pickle(Late, _seven)
    try:
        assert pickle.loads(pickling.dumps([Late()])) == [7]
        copyreg.pickle(Late, _eight)  # a reducer replaced: the table's size does not change
        assert pickle.loads(pickling.dumps([Late()])) == [8]
    finally:
        copyreg.dispatch_table.pop(Late, None)
        pickling.dumps(None)  # (the table made again without it)


def test_a_function_shipped_with_every_batch_of_a_call_is_pickled_and_unpickled_once() -> None:
    from b2batch.calls.pickling import dumps, load_once

    offset = 7

    def add(x: int) -> int:  # a closure: cloudpickle sends it by value
        return x + offset

    shipped: dict = {}
    first, second = dumps([(add, 1)], shipped=shipped), dumps([(add, 2)], shipped=shipped)
    assert list(shipped) == [id(add)] and shipped[id(add)][1] in first and shipped[id(add)][1] in second
    load_once.cache_clear()
    (f1, a1), = pickle.loads(first)
    (f2, a2), = pickle.loads(second)
    assert f1 is f2 and (f1(a1), f2(a2)) == (8, 9)  # made once on the node too
    assert pickle.loads(dumps([(add, 3)]))[0][0](3) == 10  # without shipped: as before
