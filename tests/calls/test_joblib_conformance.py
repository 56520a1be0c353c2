"""joblib's own backend-parametrized tests (``joblib/test/test_parallel.py``, shipped with joblib) run against
the b2batch backend, as the issue asks: the backend registered before the module is imported.

How: ``python -m pytest -p b2batch.joblib <joblib's test_parallel.py> -k "b2batch and (...)"``. ``-p`` imports
``b2batch.joblib`` as a plugin before collection, so ``BACKENDS`` holds ``b2batch`` when the module builds its
parameter lists; ``ALL_VALID_BACKENDS`` then also holds ``B2BatchBackend()``, built without arguments. The jobs
go to ``local`` (a settings file named by ``$B2BATCH_SETTINGS``). joblib's tests are not copied here.

Chosen: every test parametrized over all backends that runs in seconds with jobs. Left out, with the reason:

- ``test_nested_loop[loky-b2batch]``, ``[multiprocessing-b2batch]``, ``[back_compat_backend-b2batch]``: the
  inner ``Parallel(backend="b2batch")`` runs in loky's or multiprocessing's worker processes, which never
  imported b2batch.joblib (the same for any backend registered by a plugin);
- ``test_nested_loop[b2batch-b2batch]``: an explicit b2batch backend inside a job beyond
  ``max_recursion_level`` (default 0) is an error by design (issue 17: "beyond it a clear error");
- tests of timing, memmapping, threads limits and loky internals: they test those backends, not the protocol.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("joblib")

from conftest import clean_env  # noqa: E402

CHOSEN = " or ".join([
    "test_simple_parallel and (2-2-b2batch or 2--1-b2batch or 11--2-b2batch)",
    "test_invalid_njobs",
    "test_error_in_task_iterator",
    "test_nested_loop and (b2batch-threading or b2batch-sequential or threading-b2batch or sequential-b2batch)",
    "test_parallel_timeout_fail_with_generator",
    "test_abort_backend and b2batch",
    "test_parallel_pretty_print and 2-b2batch",
])


@pytest.mark.slow
def test_joblibs_own_backend_tests_pass_with_the_b2batch_backend(tmp_path: Path) -> None:
    import importlib.util

    suite = Path(importlib.util.find_spec("joblib").origin).parent / "test" / "test_parallel.py"
    # Folders named absolutely: relative ones would be relative to the __main__ module's folder, pytest's own
    # package under `python -m pytest` (b2batch.jobscript.base_folder.base_dir)
    (tmp_path / "settings.json").write_text(json.dumps({"batch_system": "local", "local_slots": 4,
                                                        "log_dir": str(tmp_path / "logs"),
                                                        "task_file_dir": str(tmp_path / "task_files")}))
    env = clean_env(B2BATCH_SETTINGS=str(tmp_path / "settings.json"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "b2batch.joblib", "-p", "no:cacheprovider", "-q",
                           "-o", "addopts=", str(suite), "-k", f"b2batch and ({CHOSEN})"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    assert int(summary.split(" passed")[0].split()[-1]) >= 15, summary  # the selection did not shrink
