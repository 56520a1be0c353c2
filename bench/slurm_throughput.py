#!/usr/bin/env python3
"""Throughput of b2batch on the local Slurm, against one raw job array of the same jobs in the same run.

The workload: ``--n`` trivial independent tasks (each writes one small file) and one aggregate task that
requires them all. The benchmark writes them as a module and a workflow script in a fresh temporary folder
and measures, one after the other, with the queue free of this benchmark's jobs before each:

  raw array   the limit: the same N job wrappers that b2batch writes for the trivial tasks (written by
              b2batch's own TaskJobs.write_files, so every job runs the same node-side command, the same work),
              submitted as ONE ``sbatch --array=1-N`` whose element k execs wrapper k; the wait watches the
              jobs' exit-code files locally and asks ``squeue`` every 2 s (and at once when all are written);
  b2batch     ``python workflow.py``: ``b2batch.process(Aggregate(n=N), batch=True, workers=N+1,
              batch_system="slurm")`` with default settings; the workflow script reports at its exit the
              scheduler calls it made (the run record's ``scheduler_calls``), the monitor's polls and its own
              CPU time (``getrusage``).

By default the raw array runs first, then b2batch (``--order b2batch-first`` swaps them); ``--repeat K``
runs K rounds, the order alternating, and prints the median ratio. One wrapper runs once outside Slurm
before everything, to warm the file-system caches. Outputs and exit-code files are removed between the
measurements. With ``--tuned-poll-interval``/``--tuned-max-poll-interval`` one more b2batch measurement
with those settings follows.

Output, one line each: the raw array (wall time, its scheduler calls); b2batch (wall time of the whole
workflow script, of its ``process()`` call, and the ratio to the raw array; lower is better, the target of
issue 6 is at most 1.2 at N=1000); b2batch's scheduler calls (sbatch, squeue, scancel) and polls (they
should grow with N / max_array_size plus the number of polls, not with N); the steering process's CPU time
(its own, and that of the scheduler commands it ran); and when b2batch saw the last trivial job and the
aggregate done. The machine is shared: other users' jobs and load make single numbers noisy; each line
says how many other jobs were queued or running and the 1-minute load average at its start (the load
average lags: at the start of a round's second measurement it still counts the first one's jobs).

Exit status 0 when every measurement ran and every job succeeded, 1 otherwise. Jobs are named
``b2bench<tag>...``; whatever of them is left (interrupt, error) is cancelled at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shlex
import shutil
import signal
import statistics
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
        from b2batch.engine import Run
        from b2batch.luigi_frontend.jobs import RunContext, TaskJobs

        jobs = TaskJobs(Run(), RunContext.of_main())
        rows = []
        for i in range(N):
            job = jobs.make(tasks.Trivial(i=i))
            jobs.write_files(job)
            job.files.reset()
            rows.append([str(job.files.wrapper), str(job.files.exit_code), str(job.files.result)])
        return {{"jobs": rows}}


    def calls_of(counts, program):
        return counts.get(program, 0)


    def run():
        from b2batch.display import report

        runs = []  # the engine's run of process(), taken from the report it writes
        original = report.RunReport.__enter__

        def remember(self):
            runs.append(self)
            return original(self)

        report.RunReport.__enter__ = remember
        cpu_self, cpu_children, start = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.time()
        result = b2batch.process(tasks.Aggregate(n=N), batch=True, workers=N + 1, batch_system="slurm",
                                 exit_on_failure=False)
        end = time.time()
        records = list(runs[0].run.jobs.values())
        trivial_ends = [r.ended_at for r in records if r.family == "Trivial" and r.ended_at]
        trivial_submits = [r.submitted_at for r in records if r.family == "Trivial" and r.submitted_at]
        aggregate = [r for r in records if r.family == "Aggregate"]
        return {{
            "process_wall": end - start,
            "process_cpu": cpu(resource.RUSAGE_SELF) - cpu_self,
            "commands_cpu": cpu(resource.RUSAGE_CHILDREN) - cpu_children,
            "script_cpu": cpu(resource.RUSAGE_SELF),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "calls": dict(runs[0].run.scheduler_calls) if runs else {{}},
            "polls": calls_of(runs[0].run.scheduler_calls, "squeue"),
            "submissions": calls_of(runs[0].run.scheduler_calls, "sbatch"),
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
        rows = [line.split("|", 2) for line in done.stdout.splitlines() if line.count("|") == 2]
        return [(job_id, name, state) for job_id, name, state in rows]

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
        time.sleep(0.1 if len(missing) < 50 else 0.5)  # stat the files often only near the end
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


class Bench:
    """The measurements of one run: they share the folder, the job files and the job-name prefix."""

    def __init__(self, args: argparse.Namespace, folder: Path, cluster: Cluster, env: dict[str, str]) -> None:
        self.args = args
        self.folder = folder
        self.cluster = cluster
        self.env = env
        self.jobs: list[list[str]] = []
        self.ok = True
        self.lines: list[str] = []

    def prepare(self) -> None:
        log(f"folder {self.folder}, job names {self.cluster.prefix}*; writing the job files of {self.args.n} tasks")
        prepared, _wall, _code = run_workflow(self.folder, self.env, "prepare", self.args.timeout, "prepare")
        self.jobs = prepared["jobs"]
        # Warm the caches: one wrapper outside Slurm (the measurements then start equally warm).
        subprocess.run([self.jobs[0][0]], cwd=self.folder, timeout=120, check=True)
        clean_outputs(self.folder, self.jobs)

    def _start(self, what: str) -> str:
        others = self.cluster.wait_until_free(600)
        context = f"at start: others' live jobs {others}, load {os.getloadavg()[0]:.2f}"
        log(f"{what} ({context})")
        return context

    def _add(self, *lines: str) -> None:
        self.lines.extend(lines)
        for line in lines:
            log(line.strip())

    def raw(self) -> dict:
        context = self._start(f"raw array of {self.args.n}")
        r = measure_raw(self.folder, self.jobs, self.cluster, f"{self.cluster.prefix}.raw", self.args.timeout)
        self.ok &= r["failed"] == 0
        self._add(f"  raw array        wall {r['wall']:7.1f} s   sbatch 1, squeue {r['squeue']}   "
                  f"failed {r['failed']}/{self.args.n}   ({context})")
        clean_outputs(self.folder, self.jobs)
        return r

    def b2batch(self, label: str, extra: dict[str, str], profile: Path | None = None) -> dict:
        context = self._start(f"b2batch {label}")
        stats, wall, code = run_workflow(self.folder, {**self.env, **extra}, "run", self.args.timeout, label,
                                         profile)
        stats["wall"] = wall
        self.ok &= code == 0 and stats["complete"]
        calls = stats["calls"]
        self._add(
            f"  b2batch {label:8s} wall {wall:7.1f} s (script; process() {stats['process_wall']:.1f} s)   exit "
            f"{code}, complete {stats['complete']}, job states {stats['states']}   ({context})",
            f"    scheduler calls: sbatch {calls.get('sbatch', 0)}, squeue {calls.get('squeue', 0)}, scancel "
            f"{calls.get('scancel', 0)}; polls {stats['polls']}; submissions {stats['submissions']}; all {calls}",
            f"    steering CPU: process() {stats['process_cpu']:.1f} s, whole script {stats['script_cpu']:.1f} s; "
            f"scheduler commands it ran {stats['commands_cpu']:.1f} s; steering peak RSS "
            f"{stats['peak_rss_mb']:.0f} MB",
            f"    timeline (s after process() began): first trivial job submitted {fmt(stats['first_submitted'])}, "
            f"last trivial job done {fmt(stats['last_trivial_done'])}, aggregate submitted "
            f"{fmt(stats['aggregate_submitted'])}, done {fmt(stats['aggregate_done'])}",
        )
        clean_outputs(self.folder, self.jobs)
        if profile is not None:
            for key in ("cumulative", "tottime"):
                print(f"cProfile of the b2batch steering process ({label}), top 30 by {key}:")
                pstats.Stats(str(profile), stream=sys.stdout).sort_stats(key).print_stats(30)
        return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="trivial tasks (default 1000), plus one aggregate")
    parser.add_argument("--order", choices=["raw-first", "b2batch-first"], default="raw-first",
                        help="which measurement of a round runs first (default raw-first)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of raw + b2batch, the order alternating from round to round (default 1)")
    parser.add_argument("--only", choices=["raw", "b2batch"], default=None,
                        help="measure only one side (no ratio; e.g. to profile b2batch)")
    parser.add_argument("--tuned-poll-interval", type=float, default=None,
                        help="also measure b2batch once with this poll_interval (a 'tuned' line)")
    parser.add_argument("--tuned-max-poll-interval", type=float, default=None,
                        help="also measure b2batch once with this max_poll_interval (a 'tuned' line)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per measurement (default 3600)")
    parser.add_argument("--profile", action="store_true",
                        help="run the first default b2batch measurement under cProfile (slower) and print its top")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, job files)")
    args = parser.parse_args()

    for tool in ("sbatch", "squeue", "scancel"):
        if shutil.which(tool) is None:
            print(f"slurm_throughput: {tool} is not on PATH; start the cluster with tests/clusters/slurm.sh start",
                  file=sys.stderr)
            return 1
    prefix = f"b2bench{uuid.uuid4().hex[:8]}"
    cluster = Cluster(prefix)
    folder = Path(tempfile.mkdtemp(prefix="b2bench-throughput-"))
    (folder / f"{TASK_MODULE}.py").write_text(TASKS)
    (folder / "workflow.py").write_text(WORKFLOW)
    env = {**os.environ, "B2BENCH_N": str(args.n), "B2BENCH_JOB_NAME": prefix}
    env.pop("B2BATCH_SETTINGS", None)
    env.pop("B2LUIGI_SETTINGS_JSON", None)
    bench = Bench(args, folder, cluster, env)
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    try:
        bench.prepare()
        profile = folder / "b2batch.prof" if args.profile else None
        ratios: list[tuple[float, float]] = []  # (whole script, process()) per round
        for round_ in range(max(1, args.repeat)):
            raw_first = (args.order == "raw-first") == (round_ % 2 == 0)
            raw: dict = {}
            b2b: dict = {}
            for side in (["raw", "b2batch"] if raw_first else ["b2batch", "raw"]):
                if side == "raw" and args.only != "b2batch":
                    raw = bench.raw()
                elif side == "b2batch" and args.only != "raw":
                    b2b = bench.b2batch("default", {}, profile if round_ == 0 else None)
            if raw and b2b:
                ratios.append((b2b["wall"] / raw["wall"], b2b["process_wall"] / raw["wall"]))
                bench.lines.append(f"  ratio b2batch / raw array, round {round_ + 1} "
                                   f"({'raw' if raw_first else 'b2batch'} first): {ratios[-1][0]:.2f} (whole "
                                   f"script), {ratios[-1][1]:.2f} (process() only)   [defaults]")
        tuned = {}
        if args.tuned_poll_interval is not None:
            tuned["B2BENCH_POLL_INTERVAL"] = str(args.tuned_poll_interval)
        if args.tuned_max_poll_interval is not None:
            tuned["B2BENCH_MAX_POLL_INTERVAL"] = str(args.tuned_max_poll_interval)
        if tuned and args.only != "raw":
            stats = bench.b2batch("tuned", tuned)
            if raw:
                bench.lines.append(
                    f"  ratio b2batch tuned / raw array of the last round: {stats['wall'] / raw['wall']:.2f} "
                    f"(whole script)   [poll_interval {args.tuned_poll_interval}, max_poll_interval "
                    f"{args.tuned_max_poll_interval}]")

        what = f"only {args.only}" if args.only else f"{max(1, args.repeat)} round(s), the first {args.order}"
        print(f"slurm_throughput: N={args.n} trivial tasks + 1 aggregate on the local Slurm; {what}"
              f"{', then b2batch tuned' if tuned and args.only != 'raw' else ''}; {os.cpu_count()} CPUs on this "
              f"machine; numbers are noisy when others use the machine")
        for line in bench.lines:
            print(line)
        if ratios:
            median = statistics.median(r[0] for r in ratios)
            if len(ratios) > 1:
                print(f"  median ratio b2batch / raw array over {len(ratios)} rounds: {median:.2f} (whole script)")
            if args.n >= 1000:
                print(f"  target (issue 6): N=1000 wall time at most 1.2x the raw array: "
                      f"{'yes' if median <= 1.2 else 'NO'}")
    except KeyboardInterrupt:
        log("interrupted")
        bench.ok = False
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        log(f"error: {e}")
        bench.ok = False
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        cancelled = cluster.cancel_ours()
        if cancelled:
            log(f"cancelled {cancelled} leftover job(s)/array(s) named {prefix}*")
        if args.keep:
            log(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0 if bench.ok else 1


if __name__ == "__main__":
    sys.exit(main())
