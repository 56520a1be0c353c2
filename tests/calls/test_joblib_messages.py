"""The joblib backend's messages point at what the user wrote (issue 26 Must have 2, issue 31 items 4 and 5):
the failing call by its place in the Parallel call (not in its pilot's chunk), the front-end, the job and its
logs; the script's own file and line in a remote traceback; an argument or a value that cannot be pickled fails
with the call named; a misspelt option gets "did you mean" in one line."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("joblib")

from joblib import Parallel, delayed, parallel_config  # noqa: E402

import b2batch.joblib  # noqa: E402, F401
from b2batch.calls import RemoteTraceback  # noqa: E402
from b2batch.errors import SettingError  # noqa: E402

SCRIPT = '''\
import b2batch.joblib
from joblib import Parallel, delayed, parallel_config


def raise_at(x):
    if x == 1013:
        raise ValueError(f"no {x} here")
    return x


if __name__ == "__main__":
    with parallel_config(backend="b2batch", batch_system="local", n_jobs=4, progress=False):
        Parallel()(delayed(raise_at)(x) for x in range(1000, 1020))
'''


def raise_at(x: int) -> int:
    if x == 1013:
        raise ValueError(f"no {x} here")
    return x


def identity(x: object) -> object:
    return x


def lock_at_six(x: int) -> object:
    return threading.Lock() if x == 6 else x


def note_of(error: BaseException) -> str:
    notes = [n for n in getattr(error, "__notes__", []) if n.startswith("Raised by")]
    assert len(notes) == 1, getattr(error, "__notes__", None)
    return notes[0]


@pytest.mark.parametrize("batch_size", ["auto", 4])
def test_a_failure_names_the_calls_place_in_the_parallel_call_the_backend_the_job_and_its_logs(
        tmp_path: Path, batch_size: object) -> None:
    # joblib's batch_size=4 with n_jobs=2: call 13 is the second of its batch (calls 12 to 15).
    with parallel_config(backend="b2batch", batch_system="local", n_jobs=2, progress=False,
                         log_dir_prefix=str(tmp_path / "logs")), pytest.raises(ValueError) as caught:
        Parallel(batch_size=batch_size)(delayed(raise_at)(x) for x in range(1000, 1020))
    note = note_of(caught.value)
    assert note.startswith("Raised by call 13 of this Parallel call, in the joblib backend b2batch: local"), note
    stdout, stderr = note.split("(stdout: ", 1)[1].rstrip(")").split(", stderr: ")
    assert Path(stdout).is_file() and "no 1013 here" in Path(stderr).read_text()
    assert isinstance(caught.value.__cause__, RemoteTraceback)


def test_the_remote_traceback_shows_the_users_script_and_line(tmp_path: Path) -> None:
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1
    assert f'File "{script}", line 7, in raise_at\n    raise ValueError(f"no {{x}} here")' in done.stderr, done.stderr
    assert "<dynamic-code>" not in done.stderr
    assert "Raised by call 13 of this Parallel call, in the joblib backend b2batch" in done.stderr


def test_an_argument_that_cannot_be_pickled_names_its_call() -> None:
    with parallel_config(backend="b2batch", batch_system="local", n_jobs=2, progress=False, batch_size=4), \
            pytest.raises(Exception) as caught:
        Parallel()(delayed(identity)(threading.Lock() if x == 7 else x) for x in range(10))
    assert str(caught.value).startswith("the joblib backend b2batch: call 7 of this Parallel call (identity) cannot "
                                        "be pickled to send it to a job"), caught.value


def test_a_value_that_cannot_be_pickled_fails_its_call_alone_and_names_it() -> None:
    with parallel_config(backend="b2batch", batch_system="local", n_jobs=2, progress=False, batch_size=4):
        outcomes = []
        stream = Parallel(return_as="generator_unordered")(delayed(lock_at_six)(x) for x in range(10))
        with pytest.raises(Exception) as caught:
            outcomes.extend(stream)
    assert "the value the call returned, <unlocked _thread.lock object" in str(caught.value), caught.value
    assert note_of(caught.value).startswith("Raised by call 6 of this Parallel call"), caught.value.__notes__
    # In a job that runs several batches (a pilot's unit), the other batches keep their values.
    from joblib.parallel import BatchedCalls

    from b2batch.calls import pickling
    from b2batch.joblib.batches_on_node import BatchesRaised, run_batches

    batches = [pickling.dumps(BatchedCalls([(lock_at_six, (x,), {}) for x in xs], ("sequential", 1)))
               for xs in ([4, 5, 6, 7], [8, 9])]
    with pytest.raises(BatchesRaised) as raised:
        run_batches(batches, 1, 30)
    bad, good = raised.value.outcomes
    assert bad.index == 2 and "cannot be pickled to send it back" in str(bad.error) and bad.value is None
    assert good.error is None and good.value == [8, 9]


def test_a_misspelt_option_says_did_you_mean_and_lists_joblibs_own_names_in_one_line() -> None:
    with pytest.raises(SettingError) as caught, parallel_config(backend="b2batch", request_cpu=1):
        pass
    message = str(caught.value)
    assert "\n" not in message and "Unknown option 'request_cpu' given to the joblib backend" in message
    assert "Did you mean 'request_cpus'?" in message
    assert "joblib's own: backend, n_jobs," in message and "the backend's options: batch_system, request_cpus" in message
