"""The HTCondor emulator held to the real HTCondor 25.14 (tests/clusters/htcondor.sh): the same scenarios on both,
compared in what b2batch reads (b2batch/systems/htcondor.py): ``condor_submit -terse`` answers, ``condor_q -json``
and ``condor_history -json`` attribute names, types and values, what ``condor_q`` prints for jobs that left the
queue, ``condor_rm``'s answers and reasons, hold codes and reasons, exit codes and signals, error texts and exit
statuses, user-log event codes (the state moves).

Ids, owners, host names, times and paths are normalised before comparing. Found here and fixed in the emulator:
``ExitBySignal`` is in every job ad (false from submission on; a job removed while it ran has ``ExitBySignal`` true
and ``ExitSignal`` 15); a running job has ``RemoteHost`` but no ``LastRemoteHost``, which a job gets when it leaves
the slot it was matched to (also when it failed to start there); ``condor_history -json`` prints ``[`` ``]`` when
nothing matches (``condor_q -json`` prints nothing); condor_rm of a running job writes an eviction event (004)
before the abort (009); a job whose initial working directory is gone is held with HTCondor 25's shadow text.

Differences that remain, on purpose:

- the emulator has no ``condor_hold``/``condor_release``/``condor_qedit``: holds are injected
  (``b2batch.emulators inject``), which is what its users need (b2batch never holds a job itself);
- ``RemoteHost``/``LastRemoteHost``: the real pool names dynamic slots (``slot1_1@vm``), the emulator ``slot1@vm``;
  b2batch keeps the part after ``@``, the same in both;
- image-size events (006): the real starter writes them as it measures a job, the emulator never; left out of the
  comparison (b2batch reads no user log);
- timing: a real job shows ``JobStatus`` 2 as soon as its shadow starts, a moment before its execute event (001);
  a completed real job stays a moment in ``condor_q`` as ``JobStatus`` 4 (with ``RemoteHost``) before it moves to
  the history, where the emulator moves it at once (b2batch takes 4 from either as the job's end); the scenarios
  wait for the event and for the history.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from b2batch.systems.htcondor import ATTRIBUTES
from helpers.htcondor_real import USER, TestUser, condor_env, give, need_pool, remove_jobs_of

# The one real pool's 2 slots: one test at a time (pytest-xdist's loadgroup; tests/helpers/tiers.py groups
# tests/systems/htcondor_real/ the same way).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(name="htcondor-real")]


class Side:
    """One HTCondor, real or emulated, with a folder of its own; ``tool`` runs one of its commands there."""

    def __init__(self, kind: str, folder: Path) -> None:
        self.kind = kind
        self.folder = folder

    def tool(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        if self.kind == "real":
            variables = condor_env("/home/" + USER)
            command = ["runuser", "-u", USER, "--", "env", "-i", *(f"{k}={v}" for k, v in variables.items()), *args]
            env = dict(os.environ)
        else:
            env = {**os.environ, "B2BATCH_EMULATOR_DIR": str(self.folder / "emulator"), "B2BATCH_EMULATOR_SLOTS": "4"}
            command = [sys.executable, "-m", "b2batch.emulators", *args]
        return subprocess.run(command, cwd=self.folder, env=env, capture_output=True, text=True, timeout=60,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL)

    def submit(self, description: str) -> list[str]:
        """Submit ``description`` (as b2batch does: -terse, on stdin); the ids of its procs."""
        done = self.tool("condor_submit", "-terse", "-", input=description)
        assert done.returncode == 0, done.stderr
        first, last = re.fullmatch(r"(\d+\.\d+) - (\d+\.\d+)\n", done.stdout).groups()
        cluster = first.split(".")[0]
        return [f"{cluster}.{p}" for p in range(int(first.split(".")[1]), int(last.split(".")[1]) + 1)]

    def ads(self, tool: str, ids: list[str], attributes: str = ATTRIBUTES) -> dict[str, dict]:
        done = self.tool(tool, "-json", "-attributes", attributes, *ids)
        assert done.returncode == 0, done.stderr
        return {f"{ad['ClusterId']}.{ad['ProcId']}": ad for ad in (json.loads(done.stdout) if done.stdout.strip()
                                                                    else [])}

    def wait(self, ids: list[str], predicate: Callable[[dict], bool], timeout: float = 60,
             attributes: str = ATTRIBUTES) -> dict[str, dict]:
        """The ads of ``ids`` (condor_q, else condor_history) once each satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            ads = {**self.ads("condor_history", ids, attributes), **self.ads("condor_q", ids, attributes)}
            if len(ads) == len(ids) and all(predicate(ad) for ad in ads.values()):
                return ads
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind}: {ids} not as wanted within {timeout} s: {ads}")
            time.sleep(0.3)

    def history(self, ids: list[str], attributes: str = ATTRIBUTES, timeout: float = 60) -> dict[str, dict]:
        """condor_history's ads of ``ids`` once the queue forgot them all (a real completed job stays a moment
        in condor_q, as JobStatus 4 with its RemoteHost)."""
        deadline = time.monotonic() + timeout
        while self.ads("condor_q", ids) or len(self.ads("condor_history", ids)) < len(ids):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind}: {ids} not in condor_history alone within {timeout} s")
            time.sleep(0.3)
        return self.ads("condor_history", ids, attributes)

    def events(self, log: str) -> dict[str, list[str]]:
        """The user log's event codes per job (cluster.proc)."""
        found: dict[str, list[str]] = {}
        for code, cluster, proc in re.findall(r"^(\d{3}) \((\d+)\.(\d+)\.\d+\)", (self.folder / log).read_text(),
                                              re.M):
            found.setdefault(f"{int(cluster)}.{int(proc)}", []).append(code)
        return found


@pytest.fixture(scope="module")
def sides():
    """The real pool (as the test user) and the emulator, each in a fresh folder."""
    need_pool()
    real = Path(tempfile.mkdtemp(prefix="b2b-vs-real-", dir="/tmp"))
    emulated = Path(tempfile.mkdtemp(prefix="b2b-vs-emu-", dir="/tmp"))
    real.chmod(0o755)
    give(real, USER)
    yield {"real": Side("real", real), "emulator": Side("emulator", emulated)}
    remove_jobs_of(TestUser(USER, real), real)
    shutil.rmtree(real, ignore_errors=True)
    shutil.rmtree(emulated, ignore_errors=True)


def on_both(sides: dict[str, Side], scenario: Callable[[Side], object]) -> dict[str, object]:
    return {kind: scenario(side) for kind, side in sides.items()}


def shape(ad: dict) -> dict[str, str]:
    """Attribute names and JSON types of an ad."""
    return {key: type(value).__name__ for key, value in sorted(ad.items())}


def description(executable: str, arguments: str, count: int, log: str) -> str:
    return (f"universe = vanilla\nexecutable = {executable}\narguments = \"{arguments}\"\noutput = out.$(Process)\n"
            f"error = err.$(Process)\nlog = {log}\nJobBatchName = b2bdiff\nqueue {count}\n")


def test_exit_codes_from_submit_to_history(sides: dict[str, Side]) -> None:
    """Procs exiting 0, 1 and 2: the -terse answer, nothing from condor_q once they
    left, condor_history's ads (names, types, values), the user log's events."""

    def scenario(side: Side) -> dict:
        ids = side.submit(description("/bin/sh", "-c 'exit $(Process)'", 3, "exit.log"))
        done = side.history(ids)
        after = side.tool("condor_q", "-json", "-attributes", ATTRIBUTES, *ids)
        return {"history": [{**shape(ad), "values": [ad["JobStatus"], ad.get("ExitCode"), ad.get("ExitBySignal"),
                                                     str(ad.get("LastRemoteHost", "")).rpartition("@")[2]]}
                            for _, ad in sorted(done.items())],
                "queue_after": (after.returncode, after.stdout, after.stderr),
                "events": [[c for c in codes if c != "006"] for _, codes in sorted(side.events("exit.log").items())]}

    got = on_both(sides, scenario)
    print(json.dumps(got, indent=1))
    assert got["emulator"] == got["real"]


def test_removed_running_job(sides: dict[str, Side]) -> None:
    """condor_rm of a running job: condor_q's ad while it runs, condor_rm's answer, the job in condor_history as Removed with a reason naming
    condor_rm and the user, the user log's abort event."""

    def scenario(side: Side) -> dict:
        (job,) = side.submit(description("/bin/sleep", "60", 1, "rm.log"))
        # (the real schedd may list JobStatus 2 a moment before RemoteHost: CI BZ saw an ad without it)
        running = side.wait([job], lambda ad: ad["JobStatus"] == 2 and "RemoteHost" in ad)[job]
        # JobStatus 2 comes with the shadow; the execute event (001) only once the starter ran the job.
        deadline = time.monotonic() + 30
        while "001" not in side.events("rm.log").get(job, []) and time.monotonic() < deadline:
            time.sleep(0.2)
        removed = side.tool("condor_rm", job)
        ad = side.wait([job], lambda ad: ad["JobStatus"] == 3)[job]
        return {"running": {**shape(running), "host": running["RemoteHost"].rpartition("@")[2]},
                "rm": (removed.returncode, removed.stdout.replace(job, "ID"), removed.stderr),
                "ad": shape(ad), "reason": re.sub(r"by user \w+", "by user U", ad.get("RemoveReason", "")),
                "events": [c for c in side.events("rm.log")[job] if c != "006"]}  # 006: a timing

    got = on_both(sides, scenario)
    print(json.dumps(got, indent=1))
    assert got["emulator"] == got["real"]


def test_error_answers(sides: dict[str, Side]) -> None:
    """What the tools answer to what they cannot do: condor_rm of a job the queue does not have, condor_q and
    condor_history of one, a submit description that cannot be parsed."""

    def scenario(side: Side) -> dict:
        answers = {}
        for name, args, text in (("rm_unknown", ("condor_rm", "999999.0"), None),
                                 ("q_unknown", ("condor_q", "-json", "-attributes", ATTRIBUTES, "999999.0"), None),
                                 ("history_unknown", ("condor_history", "-json", "999999.0"), None),
                                 ("submit_no_executable", ("condor_submit", "-terse", "-"), "queue 1\n")):
            done = side.tool(*args, input=text)
            answers[name] = (done.returncode, done.stdout.strip(), done.stderr.strip())
        return answers

    got = on_both(sides, scenario)
    print(json.dumps(got, indent=1))
    assert got["emulator"] == got["real"]


def test_job_held_by_the_pool(sides: dict[str, Side]) -> None:
    """A job whose initial working directory is gone when it starts: Held with HTCondor's hold code, subcode and
    reason, as condor_q -json shows them to b2batch, and the user log's hold event; condor_rm then takes it away."""

    def scenario(side: Side) -> dict:
        gone = side.folder / "gone"
        gone.mkdir()
        give(gone, USER) if side.kind == "real" else None
        (job,) = side.submit(f"executable = /bin/true\ninitialdir = {gone}\nlog = {side.folder}/held.log\nqueue\n")
        gone.rmdir()
        attributes = ATTRIBUTES + ",HoldReasonSubCode"
        ad = side.wait([job], lambda ad: ad["JobStatus"] == 5, attributes=attributes)[job]
        side.tool("condor_rm", job)
        gone_ad = side.wait([job], lambda ad: ad["JobStatus"] == 3)[job]
        return {"held": {**shape(ad), "values": [ad["HoldReasonCode"], ad["HoldReasonSubCode"],
                                                 ad["HoldReason"].replace(str(gone), "DIR")]},
                "removed": shape(gone_ad), "events": side.events("held.log")[job]}

    got = on_both(sides, scenario)
    print(json.dumps(got, indent=1))
    assert got["emulator"] == got["real"]


def test_job_killed_by_a_signal(sides: dict[str, Side]) -> None:
    """A job whose process is killed by SIGKILL: condor_history says so (ExitBySignal, ExitSignal, no ExitCode) and
    the user log's terminate event (005) says it too."""

    def scenario(side: Side) -> dict:
        script = side.folder / "die.sh"
        script.write_text("#!/bin/sh\nkill -9 $$\n")
        script.chmod(0o755)
        (job,) = side.submit(f"executable = {script}\nlog = signal.log\nqueue\n")
        ad = side.history([job], ATTRIBUTES + ",ExitSignal")[job]
        text = (side.folder / "signal.log").read_text()
        return {"ad": {**shape(ad), "values": [ad["ExitBySignal"], ad.get("ExitSignal")]},
                "events": [c for c in side.events("signal.log")[job] if c != "006"],
                "terminated": re.findall(r"\(\d\) Abnormal termination \(signal (\d+)\)", text)}

    got = on_both(sides, scenario)
    print(json.dumps(got, indent=1))
    assert got["emulator"] == got["real"]
