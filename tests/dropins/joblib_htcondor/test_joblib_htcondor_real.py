"""joblib-htcondor's README examples, unchanged but for a print of the result, through the drop-in
(``import joblib_htcondor``: b2batch's joblib backend) on the real HTCondor of tests/clusters/htcondor.sh, as its
unprivileged test user. The examples are read from the real joblib-htcondor 0.2.3's package metadata (its venv,
tests/peers/install.sh). (joblib-htcondor itself is not run on the pool: its venv lives under root's home, which
the test user cannot read; its bindings would submit as root, which HTCondor refuses.)"""

from __future__ import annotations

import re
import subprocess

import pytest

from helpers.htcondor_real import TestUser, test_user  # noqa: F401 (a fixture)
from peers import peer_python

# The one real pool's 2 slots: one test at a time (pytest-xdist's loadgroup; tests/helpers/tiers.py groups
# tests/systems/htcondor_real/ the same way).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(name="htcondor-real")]

README = ('import importlib.metadata, sys; '
          'sys.stdout.write(importlib.metadata.metadata("joblib_htcondor").get_payload())')


def test_readme_examples_through_the_drop_in_on_the_real_pool(test_user: TestUser) -> None:
    readme = subprocess.run([str(peer_python("joblib-htcondor")), "-c", README], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    examples = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert len(examples) == 2 and "register_htcondor()" in examples[0], examples
    script = "\n".join(examples).rstrip()
    last = script.splitlines()[-1]
    test_user.write(test_user.folder / "printed.py", script[: -len(last)] + f"  print('RESULT', {last.strip()})\n")
    done = test_user.python("printed.py", timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT [-1, -2, -3, -4, -5]" in done.stdout, done.stdout
    shared = test_user.folder / "joblib_htcondor_shared_data"
    assert shared.is_dir() and not list(shared.iterdir()), "joblib-htcondor's shared_data_dir, emptied after the call"
    # The calls ran as jobs of the test user on the pool.
    mine = f'regexp("^{test_user.folder}(/|$)", Iwd)'
    test_user.wait_queue(lambda ads: ads == [], constraint=mine)  # a completed job stays a moment in the queue
    ran = test_user.condor("condor_history", "-af", "Owner", "ExitCode", "-constraint", mine).stdout.split("\n")
    ran = [line for line in ran if line.strip()]
    assert ran and all(line.split() == [test_user.name, "0"] for line in ran), ran
