"""Shims named like the real tools, so that a backend talks to the emulator through PATH."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from b2batch.emulators import TOOLS, make_bin_dir, run_with_emulator
from tests.emulators.conftest import Emu, wait_for


def test_shims_are_named_like_the_tools_and_run_through_path(emu: Emu, weird_tmp_path: Path) -> None:
    bin_dir = make_bin_dir("htcondor", weird_tmp_path / "bin")
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted(TOOLS["htcondor"])
    assert all(os.access(p, os.X_OK) for p in bin_dir.iterdir())
    (weird_tmp_path / "job.sub").write_text("executable = /bin/echo\narguments = hi\noutput = o.txt\nqueue\n")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(
        ["condor_submit", "job.sub"], cwd=weird_tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.stdout == "Submitting job(s).\n1 job(s) submitted to cluster 1.\n", done.stderr
    wait_for(lambda: (weird_tmp_path / "o.txt").exists() and (weird_tmp_path / "o.txt").read_text() == "hi\n")
    lsf = make_bin_dir("lsf", weird_tmp_path / "lsf-bin")
    assert sorted(p.name for p in lsf.iterdir()) == ["bjobs", "bkill", "bsub"]
    with pytest.raises(ValueError):
        make_bin_dir("slurm", weird_tmp_path / "x")


def test_run_with_emulator_puts_the_tools_first_on_path(emu: Emu) -> None:
    script = "bsub -J viaPath 'exit 4' && bjobs -o 'job_name' -noheader -a -J viaPath"
    assert run_with_emulator("lsf", ["sh", "-c", script]) == 0
    assert run_with_emulator("lsf", ["sh", "-c", "exit 3"]) == 3
    assert emu.table("lsf")["jobs"]["1"]["attrs"]["name"] == "viaPath"


def test_cli_bin_dir_and_emulate(emu: Emu, tmp_path: Path) -> None:
    result = emu.call("bin-dir", "htcondor", str(tmp_path / "b"))
    assert result.rc == 0 and (tmp_path / "b" / "condor_q").exists()
    assert emu.call("emulate", "htcondor", "--", "sh", "-c", "condor_q -json; exit 5").rc == 5
    assert emu.call("no_such_tool").rc == 2
