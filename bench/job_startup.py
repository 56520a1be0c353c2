#!/usr/bin/env python3
"""How long a b2batch job takes to start on the node, against bare Python measured in the same run.

Every job of a batch run executes ``python b2batch/jobscript/entry/b2batch_job.py <job.json>``: it imports b2batch and
luigi, rebuilds its one task from the spec and runs it. On a busy node (or a small test machine) this
start-up, not the scheduler, bounds how many short jobs finish per second. The benchmark writes two job
specs for a trivial task (it writes one small file), the way a batch run writes them:

  (a) the task is defined in an importable module: the job imports that module;
  (b) the task is defined in the workflow script (``__main__``): the job runs the script again.

It then times, interleaved round by round (``--runs`` rounds, after one warm-up round), these commands:

  python -c pass                  the floor: the interpreter alone
  python -c "import luigi"        the floor of anything built on luigi
  python -c "import b2batch.luigi_frontend.task_on_node"  what the node side imports, without running a task
  job (a), job (b)                the real entry point on the two specs

Output: one line per command with the median wall time, its minimum and the median CPU time (user+sys of
the child, from wait4), then ratios of the job medians to the references, then the top imports of the job
by cumulative time (``python -X importtime``). Read "job (a) / import luigi" as the price of b2batch on
top of luigi, and "job (b) / job (a)" as the price of defining tasks in the script itself.

Exit status 0 when all measurements ran (a job that fails is an error, exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENTRY = REPO / "b2batch" / "entry" / "b2batch_job.py"
TASK_MODULE = "b2bench_startup_tasks"

TASK_CODE = '''
class {name}(b2batch.Task):
    """A trivial task: one small output file."""

    def output(self):
        yield self.add_to_output("{name}.txt")

    def run(self):
        with open(self.get_output_file_name("{name}.txt"), "w") as f:
            f.write("ok\\n")
'''

MODULE_TEXT = "import b2batch\n" + TASK_CODE.format(name="ModuleNoop")

SCRIPT_TEXT = "import os\nimport sys\n\nimport b2batch\n" + TASK_CODE.format(name="MainNoop") + textwrap.dedent(f'''

    if __name__ == "__main__":
        if os.environ.get("B2BENCH_PREPARE"):
            # Write the job files as a batch run would, without submitting anything.
            from b2batch.engine import Run
            from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
            import {TASK_MODULE}

            jobs = TaskJobs(Run(), RunContext.of_main())
            for task in ({TASK_MODULE}.ModuleNoop(), MainNoop()):
                job = jobs.make(task)
                jobs.write_files(job)
                print(job.files.spec, job.files.result, *task.get_all_output_file_names(), sep="\\t")
            sys.exit(0)
        b2batch.process(MainNoop())
''')


def run_timed(command: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """Run ``command``; its wall time, CPU time (user+sys), exit code and stderr."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, child.returncode, err.read().decode(errors="replace")


def prepare(folder: Path) -> dict[str, tuple[Path, Path, Path]]:
    """Write the module, the script and the two job specs; {label: (spec, result file, output)}."""
    (folder / f"{TASK_MODULE}.py").write_text(MODULE_TEXT)
    script = folder / "startup_workflow.py"
    script.write_text(SCRIPT_TEXT)
    done = subprocess.run([sys.executable, str(script)], check=False, cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "B2BENCH_PREPARE": "1", "PYTHONPATH": str(folder)})
    if done.returncode != 0:
        raise SystemExit(f"job_startup: writing the job specs failed:\n{done.stderr}")
    rows = [line.split("\t") for line in done.stdout.splitlines() if line.count("\t") == 2]
    labels = ["job (a) module", "job (b) __main__"]
    specs = {label: (Path(a), Path(b), Path(c)) for label, (a, b, c) in zip(labels, rows)}
    for label, (spec, _result, _output) in specs.items():
        module = json.loads(spec.read_text())["task_module"]
        print(f"# {label}: task_module {module}, spec {spec}")
    return specs


def import_profile(spec: Path, folder: Path, top: int) -> None:
    """Print the job's top-level imports by cumulative time (``python -X importtime``)."""
    _wall, _cpu, code, stderr = run_timed([sys.executable, "-X", "importtime", str(ENTRY), str(spec)], folder)
    if code != 0:
        raise SystemExit(f"job_startup: the job failed under -X importtime (exit {code}):\n{stderr[-2000:]}")
    entries = []  # (cumulative us, self us, depth, name)
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        fields = line[len("import time:"):].split("|")
        name = fields[2].rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        entries.append((int(fields[1]), int(fields[0]), depth, name.strip()))
    total_self = sum(e[1] for e in entries)
    print(f"  {len(entries)} modules imported, {total_self / 1e6:.3f} s of import time in all")
    print(f"  top-level imports by cumulative time (those of 1 ms or more, top {top}):")
    for cumulative, _self, _depth, name in sorted((e for e in entries if e[2] == 0 and e[0] >= 1000),
                                                  reverse=True)[:top]:
        print(f"    {cumulative / 1e6:7.3f} s  {name}")
    print(f"  any module, by cumulative time (top {top}):")
    for cumulative, own, depth, name in sorted(entries, reverse=True)[:top]:
        print(f"    {cumulative / 1e6:7.3f} s  (self {own / 1e6:.3f} s, depth {depth})  {name}")
    notable = sorted({e[3].split(".")[0] for e in entries} & {"jinja2", "tenacity", "rich", "markupsafe",
                                                               "multiprocessing", "tornado", "psutil"})
    print(f"  notable packages imported: {', '.join(notable) or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="measured rounds (default 10), after one warm-up")
    parser.add_argument("--top", type=int, default=12, help="import entries to show (default 12)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="b2bench-startup-"))
    try:
        specs = prepare(folder)
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import luigi'": [sys.executable, "-c", "import luigi"],
            "python -c 'import b2batch.luigi_frontend.task_on_node'": [sys.executable, "-c", "import b2batch.luigi_frontend.task_on_node"],
        }
        for label, (spec, _result, _output) in specs.items():
            commands[label] = [sys.executable, str(ENTRY), str(spec)]
        walls: dict[str, list[float]] = {label: [] for label in commands}
        cpus: dict[str, list[float]] = {label: [] for label in commands}
        for round_ in range(args.runs + 1):  # round 0 warms the caches and is not counted
            for label, command in commands.items():
                if label in specs:
                    for path in specs[label][1:]:
                        path.unlink(missing_ok=True)
                wall, cpu, code, stderr = run_timed(command, folder)
                if code != 0:
                    raise SystemExit(f"job_startup: {label} exited {code}:\n{stderr[-2000:]}")
                if label in specs:
                    result = json.loads(specs[label][1].read_text())
                    if result["status"] != "DONE" or not specs[label][2].exists():
                        raise SystemExit(f"job_startup: {label} did not run its task: {result}")
                if round_ > 0:
                    walls[label].append(wall)
                    cpus[label].append(cpu)

        print(f"job_startup: {args.runs} runs each (interleaved, after one warm-up round), Python "
              f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        medians = {label: statistics.median(values) for label, values in walls.items()}
        for label in commands:
            print(f"  {label:32s} median {medians[label]:.3f} s  min {min(walls[label]):.3f} s  "
                  f"CPU median {statistics.median(cpus[label]):.3f} s")
        base, luigi_, package = (medians[k] for k in list(commands)[:3])
        for label in specs:
            print(f"  ratio {label} / python -c pass:       {medians[label] / base:5.2f}")
            print(f"  ratio {label} / import luigi:         {medians[label] / luigi_:5.2f}")
            print(f"  ratio {label} / import b2batch.luigi_frontend.task_on_node:   {medians[label] / package:5.2f}")
        a, b = (medians[label] for label in specs)
        print(f"  ratio job (b) / job (a):                {b / a:5.2f}")
        print(f"  ratio import b2batch.luigi_frontend.task_on_node / import luigi: {package / luigi_:5.2f}")
        for label, (spec, result, output) in specs.items():
            result.unlink(missing_ok=True)
            output.unlink(missing_ok=True)
            print(f"imports of {label} (python -X importtime, one run):")
            import_profile(spec, folder, args.top)
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
