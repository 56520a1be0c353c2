"""The real personal HTCondor of ``tests/clusters/htcondor.sh``, used as its unprivileged test user.

HTCondor never runs a job owned by root, and the tests run as root: every command that submits or runs a
workflow goes through :meth:`TestUser.run` (``runuser -u b2test``, a clean environment with ``CONDOR_CONFIG`` and
``PATH`` set), in a folder that user owns and root reads (:func:`user_folder`). Without the archive in
``../shared/htcondor/`` the pool is not there and the tests skip, saying so; with it, a pool that is not up skips
them (fails them under CI: ``tests/run-all.sh`` starts it).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SCRIPT = TESTS / "clusters" / "htcondor.sh"
WORKFLOWS = TESTS / "workflows"
PREFIX = Path(os.environ.get("B2BATCH_HTCONDOR_PREFIX", "/opt/b2batch-htcondor"))
USER = os.environ.get("B2BATCH_HTCONDOR_USER", "b2test")


def pool_status() -> tuple[bool, str]:
    """Whether the real pool takes jobs, and the cluster script's words about it."""
    done = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True, check=False)
    return done.returncode == 0, done.stderr.strip().splitlines()[0] if done.stderr.strip() else ""


def need_pool() -> None:
    """Skip unless the real HTCondor takes jobs (fail under CI when only the start is missing)."""
    up, words = pool_status()
    if up:
        return
    if "no HTCondor archive" in words:
        pytest.skip(f"no real HTCondor: {words}")
    if os.environ.get("CI"):
        pytest.fail(f"the real HTCondor is not running: tests/run-all.sh starts it ({words})")
    pytest.skip(f"the real HTCondor is not running (bash tests/clusters/htcondor.sh start): {words}")


def condor_env(home: str = "/root") -> dict[str, str]:
    """The environment of a command on the real pool: HTCondor's tools and this Python on PATH."""
    python_bin = str(Path(sys.executable).parent)
    return {"HOME": home, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "CONDOR_CONFIG": str(PREFIX / "condor_config"),
            "PATH": f"{PREFIX / 'htcondor' / 'bin'}:{python_bin}:/usr/local/bin:/usr/bin:/bin"}


@dataclass
class TestUser:
    """The unprivileged user that submits to the real pool, with a folder of its own."""

    __test__ = False  # not a test class
    name: str
    folder: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {**condor_env(pwd.getpwnam(self.name).pw_dir), **extra}

    def command(self, *args: str, **extra: str) -> list[str]:
        """``args`` as the test user, with the pool's environment (and ``extra`` variables)."""
        return ["runuser", "-u", self.name, "--", "env", "-i",
                *(f"{k}={v}" for k, v in self.env(**extra).items()), *args]

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 120, input: str | None = None,
            **extra: str) -> subprocess.CompletedProcess[str]:
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        return subprocess.run(self.command(*args, **extra), cwd=cwd or self.folder, capture_output=True, text=True,
                              timeout=timeout, check=False, **stdin)

    def popen(self, *args: str, cwd: Path | None = None, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*args, **extra), cwd=cwd or self.folder, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def python(self, *args: str, **kwargs) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, *args, **kwargs)

    def copy_workflow(self, script: str, folder: Path | None = None) -> Path:
        """tests/workflows/``script`` copied into ``folder`` (default the user's folder), owned by the user."""
        target = folder or self.folder
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(WORKFLOWS / script, target / script)
        give(target, self.name)
        return target / script

    def write(self, path: Path, text: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        give(path.parent, self.name)
        return path

    def condor(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """An HTCondor tool as the test user (condor_q, condor_history, condor_rm ...)."""
        return self.run(*args, timeout=timeout)

    def queue(self, constraint: str = "true", attributes: str = "ClusterId,ProcId,JobStatus") -> list[dict]:
        out = self.condor("condor_q", "-json", "-constraint", constraint, "-attributes", attributes).stdout
        return json.loads(out) if out.strip() else []

    def wait_queue(self, predicate, timeout: float = 60, **kwargs) -> list[dict]:
        """condor_q's ads once ``predicate(ads)`` holds (polling every 0.3 s)."""
        deadline = time.monotonic() + timeout
        ads: list[dict] = []
        while time.monotonic() < deadline:
            ads = self.queue(**kwargs)
            if predicate(ads):
                return ads
            time.sleep(0.3)
        raise AssertionError(f"condor_q never matched within {timeout} s; last: {ads}")


def give(path: Path, user: str) -> None:
    """``path`` (and all below it) owned by ``user``."""
    entry = pwd.getpwnam(user)
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.chown(p, entry.pw_uid, entry.pw_gid)


@pytest.fixture
def test_user() -> Iterator[TestUser]:
    """The test user with a fresh folder under /tmp (pytest's tmp_path is root's and closed to others); the
    folder and the jobs that ran in it are removed afterwards."""
    need_pool()
    folder = Path(tempfile.mkdtemp(prefix="b2b-htcondor-", dir="/tmp"))
    folder.chmod(0o755)
    give(folder, USER)
    user = TestUser(USER, folder)
    try:
        yield user
    finally:
        remove_jobs_of(user, folder)
        shutil.rmtree(folder, ignore_errors=True)


def remove_jobs_of(user: TestUser, folder: Path) -> None:
    """condor_rm of the user's jobs that run in ``folder`` or below (not those of other tests or a bench)."""
    user.condor("condor_rm", "-constraint", f'regexp("^{folder}(/|$)", Iwd)')
