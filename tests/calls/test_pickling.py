"""Pickling of calls for jobs: what is pickled once, and the pickler's own dispatch table (issue 44)."""

from __future__ import annotations

import copyreg
import pickle
from types import SimpleNamespace

from b2batch.calls import pickling
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


def test_a_pool_call_pickles_its_function_once_for_all_its_chunks() -> None:
    Counted.pickled = 0
    batch = Batch("map(Counted)", Counted(), "one", None, iter(()))
    dispatcher = SimpleNamespace(initializer=None, initargs=())
    calls = [pickling.dumps([(len, Dispatcher._shipped(dispatcher, batch), {})]) for _ in range(5)]  # type: ignore[arg-type]
    assert Counted.pickled == 1
    function, initializer, initargs = pickle.loads(calls[-1])[0][1]
    assert function(21) == 42 and initializer is None and initargs == ()


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
