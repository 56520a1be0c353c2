"""b2batch.Pool's messages point at what the user wrote (issue 31 item 5, issue 26 Must have 2): the item and
the function of a failure, with the job and its logs; the script's own file and line in a remote traceback;
what cannot be pickled (the user's function or item, never an internal name); one "Killing" line for all the
jobs cancelled at once; and a pool never closed still leaves no work dir behind (keep_work_dir=False)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import b2batch

SCRIPT = '''\
import sys
import b2batch


def boom(x):
    if x == 2:
        raise ValueError(f"no {x} here")
    return x


if __name__ == "__main__":
    with b2batch.Pool(batch_system="local", work_dir=sys.argv[1], verbose=False) as pool:
        print(pool.map(boom, range(5), chunksize=1))
'''

NEVER_CLOSED = '''\
import sys
import b2batch

pool = b2batch.Pool(num_simultaneously_running_tasks=3, max_num_resubmissions=2, batch_system="local",
                    work_dir=sys.argv[1], keep_work_dir=False, verbose=False)
print(pool.map(abs, [-1, -2, -3]))
'''


def run_script(folder: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = folder / "user_script.py"
    script.write_text(text)
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120,
                          cwd=folder)


def test_a_failure_names_the_item_the_function_the_job_and_the_scripts_own_file_and_line(tmp_path: Path) -> None:
    done = run_script(tmp_path, SCRIPT, str(tmp_path / "work"))
    assert done.returncode == 1
    script = tmp_path / "user_script.py"
    # The remote traceback names the user's script and line (not cloudpickle's "<dynamic-code>"), with its text.
    assert f'File "{script}", line 7, in boom\n    raise ValueError(f"no {{x}} here")' in done.stderr, done.stderr
    assert "<dynamic-code>" not in done.stderr
    note = done.stderr.strip().splitlines()[-1]
    assert note.startswith("Raised by item 2 of map(boom) (b2batch.Pool), in local job "), note
    packed = Path(note.rsplit(" packed in ", 1)[1])
    assert packed.name == "outputs.jsonl" and packed.is_file() and "no 2 here" in packed.read_text()


def make_unpicklable_function():  # noqa: ANN201
    lock = threading.Lock()

    def holds_a_lock(x: int) -> int:
        with lock:
            return x

    return holds_a_lock


def test_what_cannot_be_pickled_is_named_as_the_user_wrote_it(tmp_path: Path) -> None:
    with b2batch.Pool(batch_system="local", work_dir=tmp_path, verbose=False) as pool:
        with pytest.raises(Exception) as caught:
            pool.map(make_unpicklable_function(), range(3))
        message = str(caught.value)
        assert message.startswith("b2batch pool: the function 'make_unpicklable_function.<locals>.holds_a_lock' "
                                  "of map(make_unpicklable_function.<locals>.holds_a_lock) cannot be pickled"), message
        assert "run_chunk" not in message and "lock" in message
        with pytest.raises(Exception) as caught:
            pool.map(abs, [1, -2, threading.Lock(), 4], chunksize=4)
        assert "b2batch pool: item 2 (<unlocked _thread.lock object" in str(caught.value), caught.value
        assert pool.map(abs, [-5, 6]) == [5, 6]  # the pool goes on


def test_an_item_that_cannot_be_pickled_fails_alone_in_imap(tmp_path: Path) -> None:
    with b2batch.Pool(batch_system="local", work_dir=tmp_path, verbose=False) as pool:
        stream = pool.imap(abs, [-1, threading.Lock(), -3], chunksize=1)
        assert next(stream) == 1
        with pytest.raises(Exception, match=r"item 1 \(<unlocked _thread.lock"):
            next(stream)
        assert list(stream) == [3]


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_terminate_kills_the_jobs_in_one_command_and_says_so_once(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    pool = b2batch.Pool(3, batch_system="local", work_dir=tmp_path, verbose=False)
    result = pool.map_async(sleep_for, [60, 60, 60], chunksize=1)
    deadline = time.monotonic() + 30
    while sum(1 for j in pool.record.jobs.values() if j.state == "running") < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    with caplog.at_level(logging.WARNING):
        pool.terminate()
        pool.join()
    killing = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Killing")]
    assert killing == ["Killing 3 local job(s)"], killing
    with pytest.raises(b2batch.pool.PoolTerminatedError):
        result.get(5)


def test_a_pool_never_closed_leaves_no_work_dir_behind(tmp_path: Path) -> None:
    work = tmp_path / "work"
    done = run_script(tmp_path, NEVER_CLOSED, str(work))
    assert done.returncode == 0 and done.stdout.strip() == "[1, 2, 3]", done.stderr
    assert not list(work.iterdir()), sorted(str(p) for p in work.rglob("*"))


def test_a_misspelt_setting_is_refused_in_one_line_with_did_you_mean(tmp_path: Path) -> None:
    with pytest.raises(b2batch.errors.SettingError) as caught:
        b2batch.Pool(batch_system="local", work_dir=tmp_path, settings={"max_resubmision": 2})
    message = str(caught.value)
    assert "\n" not in message and "given to b2batch.Pool" in message
    assert "Did you mean 'max_resubmissions' or 'max_num_resubmissions'?" in message
    assert not list(tmp_path.iterdir()), "nothing was made"
    assert os.path.isdir(tmp_path)
