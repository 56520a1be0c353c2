"""joblib-htcondor's README examples, unchanged but for a print of the result, on the real HTCondor of
tests/clusters/htcondor.sh, as its unprivileged test user: once under the real joblib-htcondor 0.2.3 (its venv,
tests/peers/install.sh: its own code submits through the htcondor bindings to the real schedd), once through the
drop-in (``import joblib_htcondor``: b2batch's joblib backend). The same result, the same files left in the
folder (``joblib_htcondor_shared_data/``, emptied; ``logs/``) and no error text.

Differences found (docs/joblib.md, "Differences the differential tests find", and the ones below):
- joblib-htcondor warns at length (on stdout, through its logging) that ``n_jobs=-1`` makes little sense on a
  queuing system; b2batch takes ``n_jobs=-1`` as "as many as the batch system runs" and says nothing;
- joblib-htcondor submits one cluster per call (``batch_size=1``), b2batch fewer jobs (``batch_size="auto"``,
  documented), and its logs go to ``logs/jht-<uuid>-l0/<cluster>.0.joblib.*`` there, ``logs/joblib/`` here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from helpers.htcondor_real import TestUser, give, test_user  # noqa: F401 (a fixture)
from peers import peer_python

# The one real pool's 2 slots: one test at a time (pytest-xdist's loadgroup; tests/helpers/tiers.py groups
# tests/systems/htcondor_real/ the same way).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(name="htcondor-real")]

README = ('import importlib.metadata, sys; '
          'sys.stdout.write(importlib.metadata.metadata("joblib_htcondor").get_payload())')


def jobs_in(user: TestUser, folder: Path) -> list[list[str]]:
    """Owner and exit code of each job that ran in ``folder``, once the queue forgot them."""
    mine = f'regexp("^{folder}(/|$)", Iwd)'
    user.wait_queue(lambda ads: ads == [], constraint=mine)  # a completed job stays a moment in the queue
    out = user.condor("condor_history", "-af", "Owner", "ExitCode", "-constraint", mine).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def test_readme_examples_under_joblib_htcondor_and_through_the_drop_in(test_user: TestUser) -> None:
    theirs_python = peer_python("joblib-htcondor")
    readme = subprocess.run([str(theirs_python), "-c", README], capture_output=True, text=True, timeout=60,
                            check=True).stdout
    examples = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert len(examples) == 2 and "register_htcondor()" in examples[0], examples
    script = "\n".join(examples).rstrip()
    last = script.splitlines()[-1]
    printed = script[: -len(last)] + f"  print('RESULT', {last.strip()})\n"
    runs = {}
    for name, python in (("theirs", str(theirs_python)), ("ours", "python3")):
        folder = test_user.folder / name
        test_user.write(folder / "printed.py", printed)
        give(folder, test_user.name)
        runs[name] = test_user.run(python, "printed.py", cwd=folder, timeout=150)
        assert runs[name].returncode == 0, (name, runs[name].stderr[-3000:])
        assert "RESULT [-1, -2, -3, -4, -5]" in runs[name].stdout, (name, runs[name].stdout)
        shared = folder / "joblib_htcondor_shared_data"
        assert shared.is_dir() and not list(shared.iterdir()), f"{name}: shared_data_dir, emptied after the call"
        assert sorted(p.name for p in folder.iterdir()) == ["joblib_htcondor_shared_data", "logs", "printed.py"]
        ran = jobs_in(test_user, folder)
        assert ran and all(job == [test_user.name, "0"] for job in ran), (name, ran)
        assert "Traceback" not in runs[name].stderr and "ERROR" not in runs[name].stderr, runs[name].stderr
    assert len(jobs_in(test_user, test_user.folder / "theirs")) == 5  # one cluster per call
    # The one text of difference (listed above): joblib-htcondor's warning, which its logging prints on stdout.
    assert "n_jobs to -1 does not make much sense" in runs["theirs"].stdout
    assert runs["ours"].stdout == "RESULT [-1, -2, -3, -4, -5]\n" and runs["ours"].stderr.strip() == "", runs["ours"]
