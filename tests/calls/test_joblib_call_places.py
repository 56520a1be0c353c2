"""Which call of a ``Parallel`` call a joblib error names, without a job: a batch's calls are numbered by their
place in the whole ``Parallel`` call (the batch's first place plus the index inside it), not inside the batch.
The end-to-end messages (a failing call in a real job) are tested in test_joblib_messages.py, in the slow tier."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

from b2batch.joblib.call_batch import CallBatch, Pending


def _where(member: Pending, index: int | None) -> str:
    job = SimpleNamespace(system="local", job_id="7", files=SimpleNamespace(stdout="out.log", stderr="err.log"))
    return CallBatch._where(SimpleNamespace(frontend="joblib"), member, index, job)  # type: ignore[arg-type]


def test_a_failing_call_is_named_by_its_place_in_the_parallel_call() -> None:
    member = Pending(batch=None, future=concurrent.futures.Future(), calls=4, position=8)
    assert _where(member, 2).startswith("Raised by call 10 of this Parallel call, in joblib: local job 7 ")
    assert "stdout: out.log, stderr: err.log" in _where(member, 2)
    assert _where(member, None).startswith("Raised by calls 8 to 11 of this Parallel call")
    single = Pending(batch=None, future=concurrent.futures.Future(), calls=1, position=3)
    assert _where(single, None).startswith("Raised by call 3 of this Parallel call")
