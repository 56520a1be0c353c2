#!/usr/bin/env python3
"""Job-script rendering per job: what the luigi front-end spends on one job's files in the steering process.

For ``--n`` tasks of one class (a plain job, and with ``--container`` also a class whose jobs run in a podman
container) it times, per job and in the same process:

- ``make``: ``TaskJobs.make(task)``: the job with its JobConfig (the front-end's resolver);
- ``render``: ``wrapper.render_job_wrapper(...)``: the executable wrapper's text, as ``TaskJobs.write_files``
  renders it;
- ``write``: ``TaskJobs.write_files(job)``: the job's folders, spec and wrapper written (rendering included).

Each is the best of ``--repeat`` passes over the tasks (the machine is shared: the best pass is the one least
disturbed). ``render`` is also given against a reference timed in the same run: jinja2 rendering a template of
the wrapper's length with one variable (``render/jinja``), so that a number means something on any machine.
The last line is JSON (``bench/before_after.py --bench job_script_render`` reads it)::

    python3 bench/job_script_render.py --n 2000 --container
    python3 bench/before_after.py --bench job_script_render --base b73d5c8 --script-from head --rounds 3 -- --n 2000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable


def _best(passes: int, tasks: list[Any], once: Callable[[Any], Any]) -> float:
    """The best over ``passes`` of the seconds per task of ``once``."""
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        for task in tasks:
            once(task)
        best = min(best, (time.perf_counter() - started) / len(tasks))
    return best


def measure(n: int, repeat: int, container: bool) -> dict[str, float]:
    import jinja2

    import b2batch
    from b2batch.engine import Run
    from b2batch.jobscript import wrapper
    from b2batch.luigi_frontend.jobs import RunContext, TaskJobs

    class Plain(b2batch.Task):
        number = b2batch.IntParameter()
        env = {"OMP_NUM_THREADS": "1"}

    class Boxed(Plain):
        container = {"engine": "podman", "image": "localhost/analysis:1.0", "mounts": ["/data:/in:ro"]}

    figures: dict[str, float] = {}
    run = Run()
    try:
        jobs = TaskJobs(run, RunContext(script=str(Path.cwd() / "flow.py")))
        for name, cls in (("plain", Plain), *((("container", Boxed),) if container else ())):
            tasks = [cls(number=i) for i in range(n)]
            made = {}

            def make(task: Any) -> None:
                made[task.task_id] = jobs.make(task)

            def render(task: Any) -> str:
                job = made[task.task_id]
                return wrapper.render_job_wrapper(task, task.task_id, job.config, job.files,
                                                  [*wrapper.executable_of(task, job.config),
                                                   str(wrapper.ENTRY_POINT), job.files.path_of("spec")])

            figures[f"{name} make ms/job"] = 1000 * _best(repeat, tasks, make)
            figures[f"{name} render ms/job"] = 1000 * _best(repeat, tasks, render)
            figures[f"{name} write ms/job"] = 1000 * _best(repeat, tasks, lambda t: jobs.write_files(made[t.task_id]))
            if name == "plain":
                text = render(tasks[0])
                template = jinja2.Template("{{ x }}" + text.replace("{", "(").replace("}", ")"))
                reference = _best(repeat, tasks, lambda t: template.render(x=t.task_id))
                figures["plain render/jinja"] = figures["plain render ms/job"] / (1000 * reference)
    finally:
        run.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="tasks (jobs) per class (default 2000)")
    parser.add_argument("--repeat", type=int, default=3, help="passes; the best counts (default 3)")
    parser.add_argument("--container", action="store_true", help="also a class whose jobs run in podman")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="b2bench-render-")
    os.chdir(folder)
    sys.modules["__main__"].__file__ = os.path.join(folder, "flow.py")  # the base folder, at every revision
    try:
        figures = measure(args.n, args.repeat, args.container)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"job-script rendering, N={args.n} per class, best of {args.repeat}, load {os.getloadavg()[0]:.2f}")
    for key, value in figures.items():
        print(f"  {key:<28} {value:8.3f}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
