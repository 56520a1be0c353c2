"""How far ahead a joblib call with ``n_jobs=-1`` asks joblib for batches (``CallBatch._ask_ahead``), without a
job: the units the throttle has room for, of a batch each, of ``batch_size`` calls, or of UNIT_SECONDS of timed
calls, bounded for tiny calls, and nothing while probing. The whole call on local pilots is in
test_joblib_backend.py (slow tier)."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from b2batch.joblib.call_batch import CallBatch, Pending


@pytest.mark.parametrize("batch_size, coalesce, per_call, room, waiting", [
    ("auto", False, None, 300, 300),  # a batch per unit (long calls, jobs of their own): the throttle's room
    (4, False, None, 300, 1200),  # batch_size calls per unit
    ("auto", True, 0.05, 300, 3000),  # units of UNIT_SECONDS of timed calls
    ("auto", True, 1e-6, 300, 10_000),  # tiny calls: at most MAX_UNIT_BATCHES batches (here of one call each)
    ("auto", True, None, 300, 0),  # still probing: nothing asked for
])
def test_the_call_asks_joblib_ahead_for_the_units_the_throttle_has_room_for(batch_size, coalesce, per_call, room,
                                                                            waiting) -> None:
    asked = []

    def more() -> bool:
        asked.append(1)
        call.submit_one()
        return len(asked) < 50_000

    call = SimpleNamespace(more=more, batch_size=batch_size, coalesce=coalesce, per_call=per_call, _pending=deque(),
                           _stopping=False, _room=lambda: room)
    call.submit_one = lambda: call._pending.append(Pending(batch=None, future=None, calls=1))
    CallBatch._ask_ahead(call)
    assert len(call._pending) == waiting


def test_once_joblibs_input_is_used_up_the_call_asks_no_more() -> None:
    left = [3]

    def more() -> bool:
        if not left[0]:
            return False
        left[0] -= 1
        call._pending.append(Pending(batch=None, future=None, calls=1))
        return True

    call = SimpleNamespace(more=more, batch_size="auto", coalesce=False, per_call=None, _pending=deque(),
                           _stopping=False, _room=lambda: 300)
    CallBatch._ask_ahead(call)
    assert len(call._pending) == 3 and call.more is None
