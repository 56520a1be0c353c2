"""Front-ends ask the engine, not the batch system's class: whether a job needs its own job script is the
batch system's answer through ``Run.needs_job_script``, never a test of ``run.systems[...].pooled``."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.simulated import Simulated, make_job

from b2batch.engine import Run
from b2batch.engine.pilots.kinds import BundleSystem, PilotSystem

PACKAGE = Path(__file__).resolve().parents[2] / "b2batch"


def test_a_job_in_pilots_or_bundles_needs_no_job_script_of_its_own(tmp_path: Path) -> None:
    run = Run()
    inner = run.add_system("simulated", Simulated)
    for kind in (PilotSystem, BundleSystem):
        run.add_system(f"simulated-{kind.kind}s", lambda run, kind=kind: kind(run, inner))
    own, in_pilot, in_bundle = (make_job(tmp_path, key, system=name) for key, name in (
        ("own", "simulated"), ("pilot", "simulated-pilots"), ("bundle", "simulated-bundles")))
    assert run.needs_job_script(own)
    assert not run.needs_job_script(in_pilot) and not run.needs_job_script(in_bundle)


def test_no_front_end_looks_into_the_runs_batch_system_objects() -> None:
    looking = re.compile(r"\.systems\[|\.pooled\b|[\"']pooled[\"']")
    found = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                   if path.relative_to(PACKAGE).parts[0] not in ("engine", "systems", "emulators")
                   and looking.search(path.read_text()))
    assert found == [], found
