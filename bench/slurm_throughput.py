#!/usr/bin/env python3
"""Throughput of b2batch on the local Slurm, against one raw job array of the same jobs in the same run.

The workload: ``--n`` trivial independent tasks (each writes one small file) and one aggregate task that
requires them all. The benchmark writes them as a module and a workflow script in a fresh temporary folder
and measures, one after the other, with the queue free of this benchmark's jobs before each:

  raw array   the limit: the same N job wrappers that b2batch writes for the trivial tasks (written by
              b2batch's own JobFiles.prepare, so every job runs the same node-side command, the same work),
              submitted as ONE ``sbatch --array=1-N`` whose element k execs wrapper k; the wait watches the
              jobs' exit-code files locally and asks ``squeue`` only every 2 s (and once more at the end);
  b2batch     ``python workflow.py``: ``b2batch.process(Aggregate(n=N), batch=True, workers=N+1,
              batch_system="slurm")`` with default settings; the workflow script reports at its exit the
              scheduler calls it made (``b2batch.commands.call_counts``), the monitor's polls and its own
              CPU time (``getrusage``).

By default the raw array runs first, then b2batch (``--order b2batch-first`` swaps them); one wrapper runs
once outside Slurm before both, to warm the file-system caches. Outputs and exit-code files are removed
between the measurements. With ``--tuned-poll-interval``/``--tuned-max-poll-interval`` a second b2batch
measurement with those settings follows.

Output, one line each: the raw array (wall time, its scheduler calls); b2batch (wall time of the whole
workflow script, of its ``process()`` call, and the ratio to the raw array; lower is better, the target of
issue 6 is at most 1.2 at N=1000); b2batch's scheduler calls (sbatch, squeue, scancel) and polls (they
should grow with N / max_array_size plus the number of polls, not with N); the steering process's CPU time
(its own, and that of the scheduler commands it ran); and when b2batch saw the last trivial job and the
aggregate done. The machine is shared: other users' jobs and load make single numbers noisy; the lines
"others' jobs" and "load" say how busy it was.

Exit status 0 when every measurement ran and every job succeeded, 1 otherwise. Jobs are named
``b2bench<tag>...``; whatever of them is left (interrupt, error) is cancelled at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

TASK_MODULE = "b2bench_throughput_tasks"

TASKS = textwrap.dedent('''
    """The benchmark's tasks: N trivial ones and an aggregate of them."""
    import b2batch


    class Trivial(b2batch.Task):
        i = b2batch.IntParameter()

        def output(self):
            yield self.add_to_output("trivial.txt")

        def run(self):
            with open(self.get_output_file_name("trivial.txt"), "w") as f:
                f.write(f"{self.i}\\n")


    class Aggregate(b2batch.Task):
        n = b2batch.IntParameter()

        def requires(self):
            return [Trivial(i=i) for i in range(self.n)]

        def output(self):
            yield self.add_to_output("aggregate.txt")

        def run(self):
            total = 0
            for name in self.get_input_file_names("trivial.txt"):
                with open(name) as f:
                    total += int(f.read())
            with open(self.get_output_file_name("aggregate.txt"), "w") as f:
                f.write(f"{total}\\n")
''')

WORKFLOW = textwrap.dedent(f'''
    """The benchmark's workflow script; B2BENCH_* variables configure it (no flags: jobs get the same argv)."""
    import json
    import os
    import resource
    import sys
    import time

    import b2batch
    from b2batch import commands

    import {TASK_MODULE} as tasks

    N = int(os.environ["B2BENCH_N"])
    b2batch.set_setting("job_name", os.environ["B2BENCH_JOB_NAME"])
    for name in ("poll_interval", "max_poll_interval"):
        if os.environ.get("B2BENCH_" + name.upper()):
            b2batch.set_setting(name, float(os.environ["B2BENCH_" + name.upper()]))


    def cpu(who):
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime


    def prepare():
        """Write the job files of the trivial tasks as a batch run does, submit nothing; list the wrappers."""
        from b2batch.jobfiles import JobFiles

        rows = []
        for i in range(N):
            task = tasks.Trivial(i=i)
            files = JobFiles.for_task(task)
            files.prepare(task)
            rows.append([str(files.wrapper), str(files.exit_code), str(files.result)])
        return {{"jobs": rows}}


    def run():
        from b2batch.events import RUN
        from b2batch.systems.slurm import SlurmProcess

        commands.call_counts.clear()
        cpu_self, cpu_children, start = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.time()
        result = b2batch.process(tasks.Aggregate(n=N), batch=True, workers=N + 1, batch_system="slurm",
                                 exit_on_failure=False)
        end = time.time()
        records = list(RUN.jobs.values())
        trivial_ends = [r.ended_at for r in records if r.family == "Trivial" and r.ended_at]
        trivial_submits = [r.submitted_at for r in records if r.family == "Trivial" and r.submitted_at]
        aggregate = [r for r in records if r.family == "Aggregate"]
        return {{
            "process_wall": end - start,
            "process_cpu": cpu(resource.RUSAGE_SELF) - cpu_self,
            "commands_cpu": cpu(resource.RUSAGE_CHILDREN) - cpu_children,
            "script_cpu": cpu(resource.RUSAGE_SELF),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "calls": dict(commands.call_counts),
            "polls": SlurmProcess.monitor().polls,
            "submissions": getattr(SlurmProcess.submitter(), "submissions", None),
            "status": str(getattr(result, "status", result)),
            "states": {{s: sum(r.state == s for r in records) for s in {{r.state for r in records}}}},
            "first_submitted": min(trivial_submits) - start if trivial_submits else None,
            "last_trivial_done": max(trivial_ends) - start if trivial_ends else None,
            "aggregate_submitted": (aggregate[0].submitted_at - start) if aggregate and aggregate[0].submitted_at
                                   else None,
            "aggregate_done": (aggregate[0].ended_at - start) if aggregate and aggregate[0].ended_at else None,
            "complete": tasks.Aggregate(n=N).complete(),
        }}


    if __name__ == "__main__":
        stats = prepare() if os.environ.get("B2BENCH_MODE") == "prepare" else run()
        with open(os.environ["B2BENCH_STATS"], "w") as f:
            json.dump(stats, f)
''')


def log(message: str) -> None:
    print(f"# {time.strftime('%H:%M:%S')} {message}", flush=True)


class Cluster:
    """The benchmark's view of Slurm: its own jobs (by name prefix) and the others'."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.squeue_calls = 0

    def live_jobs(self) -> list[tuple[str, str, str]]:
        """(array or job id, name, state) of every pending or running job of any user."""
        self.squeue_calls += 1
        done = subprocess.run(["squeue", "--noheader", "--array", "--format=%F|%j|%T"], check=False,
                              capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"squeue failed ({done.returncode}): {done.stderr.strip()}")
        return [tuple(line.split("|", 2)) for line in done.stdout.splitlines() if line.count("|") == 2]

    def ours(self, jobs: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        return [job for job in jobs if job[1].startswith(self.prefix)]

    def cancel_ours(self) -> int:
        try:
            ids = sorted({job[0] for job in self.ours(self.live_jobs())})
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"cannot list jobs to cancel: {e}")
            return 0
        if ids:
            subprocess.run(["scancel", *ids], check=False, capture_output=True, timeout=60)
        return len(ids)

    def wait_until_free(self, timeout: float) -> int:
        """Wait until none of our jobs is queued or running; the number of others' live jobs."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.live_jobs()
            mine = self.ours(jobs)
            if not mine:
                return len(jobs)
            if time.monotonic() > deadline:
                log(f"{len(mine)} jobs of this benchmark still queued after {timeout:g} s: cancelling them")
                self.cancel_ours()
                deadline = time.monotonic() + timeout
            time.sleep(2)


def run_workflow(folder: Path, env: dict[str, str], mode: str, timeout: float, log_name: str,
                 profile: Path | None = None) -> tuple[dict, float, int]:
    """Run the workflow script; its stats, the wall time of the whole script and its exit code."""
    stats_file = folder / f"{log_name}.json"
    stats_file.unlink(missing_ok=True)
    command = [sys.executable, str(folder / "workflow.py")]
    if profile is not None:
        command[1:1] = ["-m", "cProfile", "-o", str(profile)]
    with open(folder / f"{log_name}.log", "w") as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=folder, stdout=err, stderr=subprocess.STDOUT,
                                 env={**env, "B2BENCH_MODE": mode, "B2BENCH_STATS": str(stats_file)})
        try:
            code = child.wait(timeout=timeout)
        except BaseException:
            child.send_signal(signal.SIGTERM)  # b2batch kills its jobs on SIGTERM
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
        wall = time.perf_counter() - start
    if not stats_file.exists():
        tail = (folder / f"{log_name}.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the workflow script ({mode}) exited {code} without its stats:\n{tail}")
    return json.loads(stats_file.read_text()), wall, code


def clean_outputs(folder: Path, jobs: list[list[str]]) -> None:
    shutil.rmtree(folder / "results", ignore_errors=True)
    for _wrapper, exit_code, result in jobs:
        Path(exit_code).unlink(missing_ok=True)
        Path(result).unlink(missing_ok=True)


def measure_raw(folder: Path, jobs: list[list[str]], cluster: Cluster, name: str, timeout: float) -> dict:
    """One sbatch --array of all wrappers; wait until every element wrote its exit code and left the queue."""
    raw = folder / "raw"
    raw.mkdir(exist_ok=True)
    dispatch = raw / "dispatch.sh"
    cases = "".join(f"{k}) exec {shlex.quote(wrapper)} ;;\n" for k, (wrapper, _e, _r) in enumerate(jobs, 1))
    dispatch.write_text(f'#!/usr/bin/env bash\ncase "$SLURM_ARRAY_TASK_ID" in\n{cases}esac\nexit 2\n')
    dispatch.chmod(0o755)
    log_file = raw / "slurm-%A_%a.out"
    command = ["sbatch", "--parsable", f"--array=1-{len(jobs)}", f"--job-name={name}", f"--output={log_file}",
               f"--error={log_file}", f"--chdir={raw}", str(dispatch)]
    squeue_before = cluster.squeue_calls
    start = time.perf_counter()
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"sbatch failed ({done.returncode}): {done.stderr.strip()}")
    array_id = done.stdout.strip().split(";")[0]
    missing = {Path(exit_code) for _w, exit_code, _r in jobs}
    next_squeue = start + 2.0
    left_queue_at = None
    while True:
        time.sleep(0.1)
        now = time.perf_counter()
        if missing:
            missing = {path for path in missing if not path.exists()}
            if not missing:
                next_squeue = now  # every element wrote its exit code: confirm with squeue at once
        if now < next_squeue:
            continue
        live = [job for job in cluster.live_jobs() if job[0] == array_id]
        now = time.perf_counter()
        if not missing and not live:
            wall = now - start
            break
        next_squeue = now + (0.5 if not missing else 2.0)
        if not live:  # left the queue without writing every exit code: give the files a moment, then fail
            left_queue_at = left_queue_at or now
            if now - left_queue_at > 30:
                raise RuntimeError(f"raw array {array_id}: {len(missing)} elements left no exit-code file")
        if now - start > timeout:
            raise RuntimeError(f"raw array {array_id} not done after {timeout:g} s")
    failed = sum(Path(exit_code).read_text().strip() != "0" for _w, exit_code, _r in jobs)
    return {"wall": wall, "array_id": array_id, "failed": failed,
            "squeue": cluster.squeue_calls - squeue_before}


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="trivial tasks (default 1000), plus one aggregate")
    parser.add_argument("--order", choices=["raw-first", "b2batch-first"], default="raw-first",
                        help="which measurement runs first (default raw-first)")
    parser.add_argument("--only", choices=["raw", "b2batch"], default=None,
                        help="measure only one side (no ratio; e.g. to profile b2batch)")
    parser.add_argument("--tuned-poll-interval", type=float, default=None,
                        help="also measure b2batch with this poll_interval (a second b2batch line)")
    parser.add_argument("--tuned-max-poll-interval", type=float, default=None,
                        help="also measure b2batch with this max_poll_interval (a second b2batch line)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per measurement (default 3600)")
    parser.add_argument("--profile", action="store_true",
                        help="run the default b2batch measurement under cProfile (slower!) and print its top")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, job files)")
    args = parser.parse_args()

    for tool in ("sbatch", "squeue", "scancel"):
        if shutil.which(tool) is None:
            print(f"slurm_throughput: {tool} is not on PATH; start the cluster with tests/clusters/slurm.sh start",
                  file=sys.stderr)
            return 1
    tag = uuid.uuid4().hex[:8]
    prefix = f"b2bench{tag}"
    cluster = Cluster(prefix)
    folder = Path(tempfile.mkdtemp(prefix="b2bench-throughput-"))
    (folder / f"{TASK_MODULE}.py").write_text(TASKS)
    (folder / "workflow.py").write_text(WORKFLOW)
    env = {**os.environ, "B2BENCH_N": str(args.n), "B2BENCH_JOB_NAME": prefix}
    env.pop("B2BATCH_SETTINGS", None)
    env.pop("B2LUIGI_SETTINGS_JSON", None)
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    ok = True
    lines: list[str] = []
    try:
        log(f"folder {folder}, job names {prefix}*; writing the job files of {args.n} tasks")
        prepared, _wall, _code = run_workflow(folder, env, "prepare", args.timeout, "prepare")
        jobs = prepared["jobs"]
        # Warm the caches: one wrapper outside Slurm (both measurements then start equally warm).
        subprocess.run([jobs[0][0]], cwd=folder, timeout=120, check=True)
        clean_outputs(folder, jobs)

        def raw() -> None:
            nonlocal ok
            others = cluster.wait_until_free(600)
            load = os.getloadavg()[0]
            log(f"raw array of {args.n} (others' live jobs: {others}, load {load:.2f})")
            r = measure_raw(folder, jobs, cluster, f"{prefix}.raw", args.timeout)
            ok &= r["failed"] == 0
            raw_result.update(r)
            lines.append(f"  raw array     wall {r['wall']:7.1f} s   sbatch 1, squeue {r['squeue']}   "
                         f"failed {r['failed']}/{args.n}   (at start: others' live jobs {others}, load {load:.2f})")
            log(lines[-1].strip())
            clean_outputs(folder, jobs)

        def b2b(label: str, extra: dict[str, str], profile: Path | None = None) -> None:
            nonlocal ok
            others = cluster.wait_until_free(600)
            load = os.getloadavg()[0]
            log(f"b2batch {label} (others' live jobs: {others}, load {load:.2f})")
            stats, wall, code = run_workflow(folder, {**env, **extra}, "run", args.timeout, label, profile)
            stats["wall"] = wall
            ok &= code == 0 and stats["complete"]
            results[label] = stats
            calls = stats["calls"]
            lines.append(f"  b2batch {label:8s} wall {wall:7.1f} s (script; process() {stats['process_wall']:.1f} s)"
                         f"   exit {code}, complete {stats['complete']}, job states {stats['states']}   "
                         f"(at start: others' live jobs {others}, load {load:.2f})")
            lines.append(f"    scheduler calls: sbatch {calls.get('sbatch', 0)}, squeue {calls.get('squeue', 0)}, "
                         f"scancel {calls.get('scancel', 0)}; polls {stats['polls']}; "
                         f"submissions {stats['submissions']}; all calls {calls}")
            lines.append(f"    steering CPU: process() {stats['process_cpu']:.1f} s, whole script "
                         f"{stats['script_cpu']:.1f} s; scheduler commands it ran {stats['commands_cpu']:.1f} s; "
                         f"steering peak RSS {stats['peak_rss_mb']:.0f} MB")
            lines.append(f"    timeline (s after process() began): first trivial job submitted "
                         f"{fmt(stats['first_submitted'])}, last trivial job done "
                         f"{fmt(stats['last_trivial_done'])}, aggregate submitted "
                         f"{fmt(stats['aggregate_submitted'])}, done {fmt(stats['aggregate_done'])}")
            for line in lines[-4:]:
                log(line.strip())
            clean_outputs(folder, jobs)
            if profile is not None:
                import pstats

                print(f"cProfile of the b2batch steering process ({label}), top 30 by cumulative time:")
                pstats.Stats(str(profile), stream=sys.stdout).sort_stats("cumulative").print_stats(30)
                print("top 30 by own time:")
                pstats.Stats(str(profile), stream=sys.stdout).sort_stats("tottime").print_stats(30)

        raw_result: dict = {}
        results: dict[str, dict] = {}
        profile = folder / "b2batch.prof" if args.profile else None
        sides = {"raw": [raw], "b2batch": [lambda: b2b("default", {}, profile)]}.get(args.only) or (
            [raw, lambda: b2b("default", {}, profile)] if args.order == "raw-first"
            else [lambda: b2b("default", {}, profile), raw])
        for side in sides:
            side()
        if args.only != "raw" and (args.tuned_poll_interval is not None or args.tuned_max_poll_interval is not None):
            extra = {}
            if args.tuned_poll_interval is not None:
                extra["B2BENCH_POLL_INTERVAL"] = str(args.tuned_poll_interval)
            if args.tuned_max_poll_interval is not None:
                extra["B2BENCH_MAX_POLL_INTERVAL"] = str(args.tuned_max_poll_interval)
            b2b("tuned", extra)

        print(f"slurm_throughput: N={args.n} trivial tasks + 1 aggregate on the local Slurm; "
              f"{'only ' + args.only if args.only else 'order: ' + args.order}"
              f"{', then b2batch tuned' if 'tuned' in results else ''}; {os.cpu_count()} CPUs on this machine; "
              f"numbers are noisy when others use the machine")
        for line in lines:
            print(line)
        for label, stats in results.items() if raw_result else ():
            settings = "defaults" if label == "default" else (
                f"poll_interval {args.tuned_poll_interval}, max_poll_interval {args.tuned_max_poll_interval}")
            print(f"  ratio b2batch {label} / raw array: {stats['wall'] / raw_result['wall']:.2f} (whole script), "
                  f"{stats['process_wall'] / raw_result['wall']:.2f} (process() only)   [{settings}]")
        if args.n >= 1000 and "default" in results and raw_result:
            ratio = results["default"]["wall"] / raw_result["wall"]
            print(f"  target (issue 6): N=1000 wall time at most 1.2x the raw array: {'yes' if ratio <= 1.2 else 'NO'}")
    except KeyboardInterrupt:
        log("interrupted")
        ok = False
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        log(f"error: {e}")
        ok = False
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        cancelled = cluster.cancel_ours()
        if cancelled:
            log(f"cancelled {cancelled} leftover job(s)/array(s) named {prefix}*")
        if args.keep:
            log(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
