"""What a job of calls handed back: its calls' outcomes (:func:`read_outcome`), and why one that handed back
nothing goes out again (:func:`retry_reason`, the engine's ``Run.retry_reason`` for a run of calls)."""

from __future__ import annotations

import base64
import pickle

from b2batch.calls.calls_on_node import CALL_RAISED, RESULT_UNWRITABLE, Outcome, PackOutcome
from b2batch.calls.futures import CallJobError
from b2batch.engine import Job, JobOutcome
from b2batch.engine.outcome import COMMAND_NOT_FOUND


def read_outcome(job: Job) -> Outcome | PackOutcome | None:
    """The calls' results of a job the run handed back (``job.outcome``, the engine's reading of its end)."""
    files = job.outcome.files
    if job.outcome.exit_code is None or files is None:
        return None  # killed or lost: a result file of it could be from a run cut short
    handed = job.outcome.result  # a small outcome its unit handed to its worker, in the worker's log line
    if isinstance(handed, dict) and isinstance(handed.get("pickled"), str):
        try:
            return pickle.loads(base64.b64decode(handed["pickled"]))
        except Exception as e:
            return Outcome(error=CallJobError(f"{job.name}: its result in its worker's log could not be "
                                              f"loaded: {type(e).__name__}: {e}"))
    path = files.path_of("result_bytes")  # as text: no Path made per job
    try:
        with open(path, "rb") as f:
            return pickle.loads(f.read())
    except FileNotFoundError:
        return None
    except Exception as e:
        return Outcome(error=CallJobError(f"{job.name}: its result {path} could not be loaded: "
                                          f"{type(e).__name__}: {e}"))


def retry_reason(job: Job, outcome: JobOutcome) -> str:
    """Why a job of calls that ended without a result goes out again: it was killed, lost, held and removed;
    not when a call raised (its exception is the result) or the job could not even start."""
    code = outcome.exit_code
    if code in (CALL_RAISED, RESULT_UNWRITABLE, COMMAND_NOT_FOUND) or outcome.setup_failure:
        return ""
    ended = "without an exit code" if code is None else f"with exit code {code}"
    return f"the job ended {ended} and gave no result" + (f" ({outcome.reason})" if outcome.reason else "")
