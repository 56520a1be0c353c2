"""b2batch's pypoolparty pools beside the real pypoolparty 0.3.1 (issue 26 Must have 3).

One script, ``import pypoolparty`` and a ``map``, runs twice: with the real pypoolparty (its venv,
tests/peers/install.sh) and with b2batch's (the shim in the main Python). They are compared on results,
exceptions, the work dir's leftovers (kept or removed, and its name) and resubmission counts:

- pypoolparty with the dummy Slurm and SGE it ships for testing (``pypoolparty.slurm.testing.dummy_init``; its
  "evil jobs" go into an error state a number of times) beside b2batch's aliases on local jobs (whose jobs are
  killed as many times): fast;
- both on the real local Slurm and SGE (slow).

Each difference found is named by a key; a key that is not in the table of docs/pool.md ("Differences the
differential tests find") fails the test, so every remaining difference is documented with its reason.
Also: the constructor arguments and defaults of the three classes, read from the real package.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from peers import peer_python

DOCS = Path(__file__).resolve().parents[3] / "docs" / "pool.md"
CLASSES = ("slurm.array.Pool", "slurm.Pool", "sun_grid_engine.Pool")

TASKS = '''\
import os
import signal
from pathlib import Path


def square(x):
    return x * x


def add(a, b):
    return a + b


def fails_on_three(x):
    if x == 3:
        raise KeyError(x)
    return -x


def square_dies(x):
    """Its job is killed (SIGKILL) the first DIE_TIMES times it runs x == DIE_AT (b2batch's side of the
    dummy queue's evil jobs)."""
    folder = os.environ.get("DIE_FOLDER")
    if folder and x == int(os.environ["DIE_AT"]):
        tries = len(list(Path(folder).iterdir()))
        if tries < int(os.environ["DIE_TIMES"]):
            Path(folder, str(tries)).write_text("")
            os.kill(os.getpid(), signal.SIGKILL)
    return x * x
'''

RUNNER = '''\
import contextlib
import importlib
import io
import json
import os
import sys
from pathlib import Path

import pypoolparty
import pd_tasks

spec = json.loads(sys.argv[1])
ours = "b2batch" in pypoolparty.__version__
options = dict(spec["options"])
kind = spec["kind"]
queue = spec["queue"]
if queue == "dummy" and not ours:  # the dummy Slurm or SGE that pypoolparty ships for its tests
    testing = pypoolparty.sun_grid_engine.testing if kind == "sge" else pypoolparty.slurm.testing
    paths = testing.dummy_init(spec["dummy_dir"])
    pypoolparty.testing.dummy_init_queue_state(paths["queue_state"], evil_jobs=spec["evil"])
    names = ("qsub", "qstat", "qdel") if kind == "sge" else ("sbatch", "squeue", "scancel")
    options.update({f"{name}_path": paths[name] for name in names})
cls = {"array": pypoolparty.slurm.array.Pool, "slurm": pypoolparty.slurm.Pool,
       "sge": pypoolparty.sun_grid_engine.Pool}[kind]
pool = cls(python_path=spec.get("python_path") or sys.executable, **options)
if ours and queue == "dummy":
    pool.batch_system = "local"  # b2batch's side of the dummy queue: local jobs
work_dir = Path(options["work_dir"]) if options.get("work_dir") else Path.cwd()
before = set(os.listdir(work_dir))
out = {"results": None, "error": None}
printed = io.StringIO()
try:
    with contextlib.redirect_stdout(printed):
        module, _, name = spec["func"].rpartition(":")
        function = getattr(importlib.import_module(module) if module else pd_tasks, name)
        out["results"] = getattr(pool, spec["call"])(function, spec["tasks"])
except Exception as e:
    out["error"] = [type(e).__name__, isinstance(e, RuntimeError)]
made = sorted(set(os.listdir(work_dir)) - before - {"dummy"})
out["leftovers"] = made
resubmissions = {}
for name in made:
    folder = work_dir / name
    for found in ("num_resubmissions_by_ichunk.json", "num_resubmissions_by_array_task_id.json"):
        if (folder / found).exists():
            resubmissions.update({str(k): v for k, v in json.loads((folder / found).read_text()).items() if v})
    if (folder / "outputs.jsonl").exists():
        for line in (folder / "outputs.jsonl").read_text().splitlines():
            entry = json.loads(line)
            if entry["resubmissions"]:
                resubmissions[str(entry["chunk"])] = entry["resubmissions"]
out["resubmissions"] = resubmissions
out["printed"] = [line.split()[0] for line in printed.getvalue().splitlines() if line.strip()][:1]
print("RESULT " + json.dumps(out))
'''

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d")


def documented_differences() -> set[str]:
    """The keys of the table under "Differences the differential tests find" in docs/pool.md."""
    text = DOCS.read_text()
    section = text.split("## Differences the differential tests find", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.MULTILINE))


def run(python: Path, folder: Path, spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    (folder / "pd_tasks.py").write_text(TASKS)
    (folder / "pd_runner.py").write_text(RUNNER)
    environment = {**os.environ, **(env or {}), "PYTHONPATH": str(folder)}
    done = subprocess.run([str(python), str(folder / "pd_runner.py"), json.dumps(spec)], cwd=folder, text=True,
                          capture_output=True, timeout=600, env=environment)
    assert "RESULT " in done.stdout, f"{python}: {done.stderr[-3000:]}"
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    result["leftovers"] = [TIME.sub("<time>", name) for name in result["leftovers"]]
    return result


def differences(theirs: dict[str, Any], ours: dict[str, Any]) -> set[str]:
    """The keys of what differs (see docs/pool.md)."""
    found = set()
    for key in ("results", "error", "leftovers", "resubmissions"):
        if theirs[key] != ours[key]:
            found.add(f"{key}")
    if theirs["printed"] != ours["printed"]:
        found.add("verbose-output")
    return found


def both(tmp_path: Path, spec: dict[str, Any], queue: str, die: dict[str, Any] | None = None,
         evil: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    results = []
    for side, python in (("theirs", peer_python("pypoolparty")), ("ours", Path(sys.executable))):
        folder = tmp_path / side
        work = folder / "work"
        work.mkdir(parents=True)
        options = {**spec.get("options", {})}
        if options.get("work_dir") == "WORK":
            options["work_dir"] = str(work)
        # The dummy commands start with "#!/usr/bin/env python3": the venv's python3 first on PATH.
        env = {"PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"} if side == "theirs" else {}
        if side == "ours" and die:
            (folder / "died").mkdir()
            env = {"DIE_FOLDER": str(folder / "died"), "DIE_AT": str(die["x"]), "DIE_TIMES": str(die["times"])}
        full = {**spec, "options": options, "queue": queue, "dummy_dir": str(folder / "dummy"), "evil": evil or []}
        if side == "theirs" and queue == "real":
            # SGE starts a job's interpreter (qsub -S) so that a venv's python does not see its venv: a script
            # that execs it by its path does.
            (folder / "peer-python").write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
            (folder / "peer-python").chmod(0o755)
            full["python_path"] = str(folder / "peer-python")
        results.append(run(python, folder, full, env))
    return results[0], results[1]


# --- the constructor arguments ----------------------------------------------------------------------------

INTROSPECT = '''\
import inspect, json, pypoolparty
out = {}
for path in %r:
    target = pypoolparty
    for part in path.split("."):
        target = getattr(target, part)
    out[path] = [[name, repr(p.default)] for name, p in inspect.signature(target).parameters.items()]
print(json.dumps(out))
''' % (CLASSES,)


def test_the_three_classes_take_pypoolparty_s_arguments_with_its_defaults() -> None:
    import inspect

    import b2batch.pool

    done = subprocess.run([str(peer_python("pypoolparty")), "-c", INTROSPECT], capture_output=True, text=True,
                          timeout=120, check=True)
    theirs = json.loads(done.stdout)
    found = set()
    for path in CLASSES:
        target: Any = b2batch.pool
        for part in path.split("."):
            target = getattr(target, part)
        ours = [[name, repr(p.default)] for name, p in inspect.signature(target).parameters.items()]
        assert [name for name, _ in theirs[path]] == [name for name, _ in ours if name != "settings"], path
        for (name, default), (_, mine) in zip(theirs[path], ours):
            if default != mine:
                found.add(f"default-{name}".replace("_", "-"))
    assert found <= documented_differences(), found - documented_differences()


BAD = '''\
import json, sys, pypoolparty
out = []
for path, options in json.loads(sys.argv[1]):
    target = pypoolparty
    for part in path.split("."):
        target = getattr(target, part)
    try:
        target(**options).map(abs, [1, 2])
        out.append(None)
    except Exception as e:
        out.append([isinstance(e, AssertionError), isinstance(e, ValueError)])
print(json.dumps(out))
'''

# Values refused before anything is submitted (slurm.Pool's polling_interval=0 is taken by both).
BAD_VALUES = [["slurm.array.Pool", {"polling_interval": 0}], ["slurm.array.Pool", {"slurm_call_timeout": -1}],
              ["slurm.Pool", {"num_chunks": 0, "work_dir": "a"}],
              ["sun_grid_engine.Pool", {"num_chunks": 0, "work_dir": "b"}]]  # (one second apart would collide)


def test_bad_arguments_raise_what_pypoolparty_raises(tmp_path: Path) -> None:
    found = []
    for python in (peer_python("pypoolparty"), Path(sys.executable)):
        folder = tmp_path / python.parent.parent.name
        folder.mkdir()
        done = subprocess.run([str(python), "-c", BAD, json.dumps(BAD_VALUES)], capture_output=True, text=True,
                              timeout=120, cwd=folder)
        assert done.returncode == 0, done.stderr[-3000:]
        found.append(json.loads(done.stdout))
    theirs, ours = found
    assert all(t is not None and t[0] for t in theirs), theirs  # pypoolparty's asserts
    assert all(o is not None and o[0] and o[1] for o in ours), ours  # an AssertionError and a ValueError


# --- maps under pypoolparty's dummy queues and b2batch's local jobs ------------------------------------------

SCENARIOS = {
    "values": {"call": "map", "func": "square", "tasks": list(range(7)), "options": {"work_dir": "WORK"}},
    "raises": {"call": "map", "func": "fails_on_three", "tasks": list(range(6)), "options": {"work_dir": "WORK"}},
    "starmap": {"call": "starmap", "func": "add", "tasks": [[1, 2], [3, 4], [5, 6]],
                "options": {"work_dir": "WORK"}},
    "kept": {"call": "map", "func": "square", "tasks": [1, 2], "options": {"work_dir": "WORK", "keep_work_dir": True}},
    "empty": {"call": "map", "func": "square", "tasks": [], "options": {"work_dir": "WORK"}},
    "default-work-dir": {"call": "map", "func": "square", "tasks": [3], "options": {}},
    "verbose": {"call": "map", "func": "square", "tasks": [1], "options": {"work_dir": "WORK", "verbose": True}},
}


# pypoolparty's dummy queue runs one job per status query: the less central scenarios are marked slow.
FAST = ("values", "raises", "kept")


@pytest.mark.parametrize("kind", ["array", "slurm", "sge"])
@pytest.mark.parametrize("scenario", [pytest.param(name, marks=() if name in FAST else pytest.mark.slow)
                                      for name in sorted(SCENARIOS)])
def test_maps_as_under_pypoolparty_with_its_dummy_queue(tmp_path: Path, kind: str, scenario: str) -> None:
    spec = {**SCENARIOS[scenario], "kind": kind}
    spec["options"] = {**spec["options"], "polling_interval": 0.05}
    if kind != "array":
        spec["options"]["num_chunks"] = 2 if scenario == "values" else None
    theirs, ours = both(tmp_path, spec, "dummy")
    assert theirs["error"] is None, theirs
    if scenario == "values":
        assert ours["results"] == [x * x for x in range(7)]
    if scenario == "raises":
        assert ours["results"] == [0, -1, -2, None, -4, -5] and len(ours["leftovers"]) == 1
    found = differences(theirs, ours)
    assert found <= documented_differences(), (found - documented_differences(), theirs, ours)


# Not slurm.Pool: pypoolparty's dummy_scancel.py fails (a NameError, "agrs") when asked to cancel by --name, as
# slurm.Pool does for a job in an error state, and the pool then waits minutes between retries.
@pytest.mark.parametrize("kind", ["array", "sge"])
def test_a_job_in_an_error_state_is_resubmitted_as_often_as_under_pypoolparty(tmp_path: Path, kind: str) -> None:
    spec = {"call": "map", "func": "square_dies", "tasks": [0, 1, 2], "kind": kind,
            "options": {"work_dir": "WORK", "keep_work_dir": True, "polling_interval": 0.05,
                        "max_num_resubmissions": 3}}
    evil = [{("array_task_id" if kind == "array" else "ichunk"): ("1" if kind == "array" else 1), "num_fails": 0,
             "max_num_fails": 2}]
    theirs, ours = both(tmp_path, spec, "dummy", die={"x": 1, "times": 2}, evil=evil)
    assert theirs["results"] == ours["results"] == [0, 1, 4]
    assert theirs["resubmissions"] == ours["resubmissions"] == {"1": 2}, (theirs, ours)
    assert differences(theirs, ours) <= documented_differences()


# Not slurm.Pool (its dummy's scancel, above), nor slurm.array.Pool: beyond the limit pypoolparty's array pool
# waits for ever for the task (docs/pool.md).
@pytest.mark.parametrize("kind", ["sge"])
def test_beyond_max_num_resubmissions_the_tasks_are_none_and_the_work_dir_kept(tmp_path: Path, kind: str) -> None:
    spec = {"call": "map", "func": "square_dies", "tasks": [0, 1, 2], "kind": kind,
            "options": {"work_dir": "WORK", "polling_interval": 0.05, "max_num_resubmissions": 1}}
    evil = [{"ichunk": 1, "num_fails": 0, "max_num_fails": 5}]
    theirs, ours = both(tmp_path, spec, "dummy", die={"x": 1, "times": 5}, evil=evil)
    assert theirs["results"] == ours["results"] == [0, None, 4], (theirs, ours)
    assert len(theirs["leftovers"]) == len(ours["leftovers"]) == 1
    assert ours["resubmissions"] == {"1": 1}
    found = {"resubmissions-beyond-limit" if key == "resubmissions" else key for key in differences(theirs, ours)}
    assert found <= documented_differences(), (found, theirs, ours)


# --- both on the real local Slurm and SGE --------------------------------------------------------------------

# Functions of the standard library: pypoolparty's job imports the function's module before it sets the
# caller's environment, and an SGE job does not inherit PYTHONPATH (b2batch's jobs get the caller's
# environment and import path, docs/pool.md).
REAL = {
    "values": {"call": "map", "func": "math:factorial", "tasks": list(range(7)), "options": {"work_dir": "WORK"}},
    "raises": {"call": "map", "func": "math:sqrt", "tasks": [4, -1, 9], "options": {"work_dir": "WORK"}},
    "starmap": {"call": "starmap", "func": "operator:add", "tasks": [[1, 2], [3, 4]],
                "options": {"work_dir": "WORK", "num_chunks": 1}},
}


def on_a_real_cluster(tmp_path: Path, kind: str) -> None:
    for scenario, spec in REAL.items():
        options = {**spec["options"], "polling_interval": 0.5}
        if kind == "array":
            options.pop("num_chunks", None)
        theirs, ours = both(tmp_path / scenario, {**spec, "kind": kind, "options": options}, "real")
        assert theirs["error"] is None and ours["results"] == theirs["results"], (scenario, theirs, ours)
        assert differences(theirs, ours) <= documented_differences(), (scenario, theirs, ours)
    assert ours["results"] == [3, 7]


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.parametrize("kind", ["array", "slurm"])
def test_maps_as_under_pypoolparty_on_the_real_slurm(slurm, tmp_path: Path, kind: str) -> None:  # noqa: F811
    on_a_real_cluster(tmp_path, kind)


@pytest.mark.slow
@pytest.mark.sge
def test_maps_as_under_pypoolparty_on_the_real_sge(sge, tmp_path: Path) -> None:  # noqa: F811
    on_a_real_cluster(tmp_path, "sge")
