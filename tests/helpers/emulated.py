"""A workflow run under one of b2batch's emulated schedulers (HTCondor, LSF), with an emulator state of its own
in the test's folder: inject failures, run or start the script, wait for its jobs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import clean_env


class Emulated:
    """A workflow folder with an emulator state of its own."""

    def __init__(self, system: str, wf, folder: Path) -> None:
        self.system = system
        self.wf = wf
        self.env = clean_env(B2BATCH_EMULATOR_DIR=str(folder / "emulator"), B2BATCH_EMULATOR_SLOTS="4")
        self.settings(output_wait_timeout=3, scheduler_unreachable_timeout=8)

    def settings(self, **values: object) -> None:
        (self.wf.folder / "settings.json").write_text(json.dumps(values))

    def tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "b2batch.emulators", *args], env=self.env,
                              capture_output=True, text=True, timeout=60)

    def inject(self, *args: str) -> None:
        done = self.tool("inject", self.system, *args)
        assert done.returncode == 0, done.stderr

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "b2batch", "emulate", self.system, "--",
                *self.wf.command("--system", self.system, *args)]

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*args), cwd=self.wf.folder, env=self.env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*args), cwd=self.wf.folder, env=self.env, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def wait_for_running_job(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.system == "htcondor":
                out = self.tool("condor_q", "-json", "-attributes", "ClusterId,ProcId,JobStatus").stdout
                for ad in json.loads(out) if out.strip() else []:
                    if ad["JobStatus"] == 2:
                        return f"{ad['ClusterId']}.{ad['ProcId']}"
            else:
                out = json.loads(self.tool("bjobs", "-json", "-o", "jobid stat").stdout)
                for record in out["RECORDS"]:
                    if record.get("STAT") == "RUN":
                        return record["JOBID"]
            time.sleep(0.3)
        raise AssertionError("no running job")

    def outputs(self) -> list[Path]:
        return sorted((self.wf.folder / "results").rglob("out.txt"))
