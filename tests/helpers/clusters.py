"""The local clusters of ``tests/clusters/`` (started once per suite run by ``tests/run-all.sh``): is one up,
and skip a test that needs one that is not, or fail it under CI (``CI`` set), where a skip would hide it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CLUSTERS = Path(__file__).resolve().parents[1] / "clusters"
NAMES = {"slurm": "Slurm", "sge": "SGE"}


def cluster_up(script: str) -> bool:
    """Whether ``tests/clusters/<script> status`` says the cluster runs."""
    return subprocess.run(["bash", str(CLUSTERS / script), "status"], check=False, capture_output=True).returncode == 0


def need_cluster(name: str, script: str) -> None:
    """Skip the test (fail it under CI) unless the cluster ``script`` starts is up."""
    if not cluster_up(script):
        if os.environ.get("CI"):
            pytest.fail(f"the local {name} is not running: tests/run-all.sh starts it")
        pytest.skip(f"the local {name} is not running (bash tests/clusters/{script} start)")


def need_real_cluster(system: str, request: pytest.FixtureRequest) -> None:
    """For a test parametrized by batch system: the ``slurm`` or ``sge`` fixture when ``system`` is one."""
    if system in NAMES:
        request.getfixturevalue(system)
