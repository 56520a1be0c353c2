#!/usr/bin/env python3
"""Pilot jobs (and bundles) on the local Slurm against a raw job array of ``echo`` jobs, in the same run.

The workload: ``--n`` trivial independent tasks (each writes one small file) and one aggregate task that
requires them all, written as a module and a workflow script into a fresh temporary folder; each b2batch
measurement runs the workflow script as a subprocess, in a folder of its own (outputs, job files, logs).
Three parts (``--parts``), each against a reference measured in the same run:

1. throughput, on the local Slurm, the queue free of this benchmark's jobs before each row:

   raw array   the limit: ONE ``sbatch --array=1-N`` whose element k runs a 3-line shell script that echoes k
               into its output file and writes its exit code (slurm_throughput.py's raw-array measurement:
               the wait watches the exit-code files and asks ``squeue`` every 2 s);
   pilots      ``b2batch.process(Aggregate(n=N), batch=True, workers=N+1)`` with ``batch_system = slurm``
               and ``pilot_jobs = M`` (``--pilot-jobs``, default 2: this machine has 2 cores);
   bundles     (``--tasks-per-job K``) the same with ``tasks_per_job = K`` and no pilots.

   Each row gives its wall time (the whole workflow script for b2batch) and two CPU times of the window
   from the submission until none of this benchmark's jobs is left in the queue: *machine*, the busy time
   of all CPUs from /proc/stat (every process, others' included), and *Slurm + ours*, the CPU time of a
   cpuacct cgroup into which the benchmark moves slurmctld, slurmd, munged and itself at the start (and out
   again at the end; ``--no-cgroup`` leaves them alone): all that these start meanwhile is born in it and
   counted, the job steps (slurmstepd), the jobs, the workflow script, the pilots, sbatch and squeue; of
   others' work only their Slurm jobs (each row gives their number). On a shared machine the first counts
   others' work too. How busy the machine is while this benchmark runs nothing is sampled before each row
   (``--idle-sample`` seconds). Targets (issue 14): pilots' wall time at most 0.5x the raw array's, machine
   CPU at most 2x.

2. steering: the steering process's own CPU time (``getrusage(RUSAGE_SELF)`` inside the workflow script:
   not the pilots', not the scheduler commands') per task in pilot mode at N = ``--steering-n`` (default
   10,000), on ``--steering-system`` (default slurm; ``local`` runs the pilots as processes of this machine).
   Target: at most 2 ms per task.

3. overhead: the time per task inside a pilot against plain luigi running the same N tasks in one fresh
   process (``luigi.build([...], local_scheduler=True, workers=1)``). Every trivial task writes, at the
   start of its ``run()``, the time and the CPU time used so far by the processes that run it (a pilot's
   worker process including the children it reaped, plus the child that runs the task: the worker's
   runner, which runs task after task, or a child of the task's own; or luigi's process); per runner, the
   interval from its first task to its last divided by the tasks in between is its time per task (claim,
   hand over, load and run the task, exit code, hand back; for luigi: its scheduler and worker loop). Taken
   from the pilots row of part 1 (and of part 2).

The last lines are a compact table, the ratios, and one JSON line of all figures. The machine is shared:
each row says how many other jobs were in the queue and the 1-minute load at its start; repeat a run before
trusting a ratio that surprises you.

Slurm's ``SchedulerParameters``: printed at the start. ``--batch-sched-delay-0`` makes sure the running
slurmctld has ``batch_sched_delay=0`` (tests/clusters/slurm.sh already configures it: then nothing changes);
``--scheduler-parameters VALUE`` runs with exactly VALUE (``default``: the line removed, Slurm's defaults).
Either rewrites the SchedulerParameters line of slurm.conf and runs ``scontrol reconfigure`` only when the
value differs, and puts the file back (and reconfigures again) at the end, also after an error or a SIGTERM.

Exit status 0 when every measurement ran and every job succeeded, 1 otherwise. Jobs are named
``b2benchp<tag>...``; whatever of them is left (interrupt, error) is cancelled at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_throughput import Cluster, log, measure_raw, run_workflow  # noqa: E402  (the bench's helpers)

TASK_MODULE = "b2bench_pilot_tasks"
PARTS = ("throughput", "steering", "overhead")

TASKS = textwrap.dedent('''
    """The benchmark's tasks: N trivial ones and an aggregate of them. A trivial task notes, at the start of
    its run(), when and in which process it runs and the CPU time so far of the processes that run it (with
    their reaped children): a pilot's worker and its child that runs the task (a runner that runs task after
    task, or a child of the task's own), luigi's worker that runs tasks in its own process."""
    import json
    import os
    import time

    import b2batch

    TICKS = os.sysconf("SC_CLK_TCK")


    def process_cpu(pid):
        """utime + stime + cutime + cstime of process ``pid``, in seconds."""
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return sum(int(x) for x in fields[11:15]) / TICKS


    class Trivial(b2batch.Task):
        i = b2batch.IntParameter()

        def output(self):
            yield self.add_to_output("trivial.txt")

        def run(self):
            in_process = bool(os.environ.get("B2BENCH_IN_PROCESS"))
            runner = os.getpid() if in_process else os.getppid()
            job = os.environ.get("SLURM_JOB_ID") or os.environ.get("B2BATCH_LOCAL_JOB_ID") or ""
            # In a pilot: its worker (with the children it reaped) and the process running the task (a child
            # of its own, or the worker's runner that runs task after task)
            own = os.times()
            own = own.user + own.system + own.children_user + own.children_system
            cpu = own if in_process else process_cpu(runner) + own
            stamp = [time.time(), f"{job}:{runner}", cpu]
            with open(self.get_output_file_name("trivial.txt"), "w") as f:
                f.write(f"{self.i}\\n{json.dumps(stamp)}\\n")


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
                    total += int(f.readline())
            with open(self.get_output_file_name("aggregate.txt"), "w") as f:
                f.write(f"{total}\\n")
''')

WORKFLOW = textwrap.dedent(f'''
    """The benchmark's workflow script; B2BENCH_* variables configure it (no flags: jobs get the same argv).
    Pilot and bundle jobs run this script too (their process() call serves the queue and exits): keep the
    top cheap."""
    import json
    import os
    import resource
    import time

    import b2batch

    import {TASK_MODULE} as tasks

    N = int(os.environ["B2BENCH_N"])
    WORK = os.environ["B2BENCH_WORKDIR"]
    for name in ("result_dir", "log_dir", "task_file_dir"):  # each measurement in a folder of its own
        b2batch.set_setting(name, os.path.join(WORK, name))
    b2batch.set_setting("job_name", os.environ["B2BENCH_JOB_NAME"])
    b2batch.set_setting("batch_system", os.environ.get("B2BENCH_SYSTEM", "slurm"))
    for name, kind in (("pilot_jobs", int), ("tasks_per_job", int), ("pilot_idle_timeout", float),
                       ("heartbeat_timeout", float)):
        if os.environ.get("B2BENCH_" + name.upper()):
            b2batch.set_setting(name, kind(os.environ["B2BENCH_" + name.upper()]))


    def cpu(who):
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime


    def luigi_reference():
        """The same N trivial tasks with plain luigi in this process (one worker, local scheduler)."""
        import luigi

        cpu_self, start = cpu(resource.RUSAGE_SELF), time.time()
        ok = luigi.build([tasks.Trivial(i=i) for i in range(N)], local_scheduler=True, workers=1,
                         log_level="WARNING")
        return {{"build_wall": time.time() - start, "build_cpu": cpu(resource.RUSAGE_SELF) - cpu_self,
                "script_cpu": cpu(resource.RUSAGE_SELF), "complete": bool(ok)}}


    def run():
        from b2batch.display import report

        runs = []  # the engine's run of process(), taken from the report it writes
        original = report.RunReport.__enter__

        def remember(self):
            runs.append(self)
            return original(self)

        report.RunReport.__enter__ = remember
        cpu_self, cpu_children, start = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.time()
        result = b2batch.process(tasks.Aggregate(n=N), batch=True, workers=N + 1, exit_on_failure=False)
        end = time.time()
        records = list(runs[0].run.jobs.values()) if runs else []
        trivial_ends = [r.ended_at for r in records if r.family == "Trivial" and r.ended_at]
        trivial_submits = [r.submitted_at for r in records if r.family == "Trivial" and r.submitted_at]
        aggregate = [r for r in records if r.family == "Aggregate"]
        return {{
            "process_wall": end - start,
            "process_cpu": cpu(resource.RUSAGE_SELF) - cpu_self,
            "children_cpu": cpu(resource.RUSAGE_CHILDREN) - cpu_children,
            "script_cpu": cpu(resource.RUSAGE_SELF),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "calls": dict(runs[0].run.scheduler_calls) if runs else {{}},
            "status": str(getattr(result, "status", result)),
            "states": {{s: sum(r.state == s for r in records) for s in {{r.state for r in records}}}},
            "first_submitted": min(trivial_submits) - start if trivial_submits else None,
            "last_trivial_done": max(trivial_ends) - start if trivial_ends else None,
            "aggregate_done": (aggregate[0].ended_at - start) if aggregate and aggregate[0].ended_at else None,
            "complete": tasks.Aggregate(n=N).complete(),
        }}


    if __name__ == "__main__":
        stats = luigi_reference() if os.environ.get("B2BENCH_MODE") == "luigi" else run()
        with open(os.environ["B2BENCH_STATS"], "w") as f:
            json.dump(stats, f)
''')


# --- machine CPU ------------------------------------------------------------------------------------------

def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine since boot, all CPUs (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def slurm_daemons() -> list[str]:
    """PIDs of slurmctld (and its slurmscriptd), slurmd and munged."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and Path(f"/proc/{pid}/comm").read_text().strip() in ("slurmctld", "slurmd", "munged"):
                found.append(pid)
        except OSError:
            continue
    return found


class CpuMeter:
    """The two CPU times of a window: the whole machine (/proc/stat), and Slurm + this benchmark's processes.

    The second is a cpuacct cgroup (cgroup v1) made for the run, into which the Slurm daemons and this
    process are moved: every process they start from then on (job steps, jobs, workflow scripts, pilots, sbatch)
    is born in it and counted while it runs, wherever it is re-parented (slurmstepd goes to init). Only
    accounting: the group has no limits. :meth:`close` moves whatever is in it back to the root group and
    removes it. Unavailable (not root, no cpuacct hierarchy, ``--no-cgroup``): the figure is None."""

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self, name: str, enabled: bool) -> None:
        self.group: Path | None = None
        self.note = "not measured (--no-cgroup)" if not enabled else ""
        if not enabled:
            return
        if not (self.ROOT / "cgroup.procs").exists() or os.geteuid() != 0:
            self.note = f"not measured (needs root and {self.ROOT})"
            return
        group = self.ROOT / name
        try:
            group.mkdir()
            self.group = group
            daemons = slurm_daemons()
            for pid in [*daemons, str(os.getpid())]:
                try:
                    (group / "cgroup.procs").write_text(pid)
                except ProcessLookupError:
                    continue
            self.note = f"cgroup {group}: {len(daemons)} Slurm/munge daemon(s) and this benchmark"
        except OSError as e:
            self.note = f"not measured (cgroup {group}: {e})"
            self.close()

    def now(self) -> dict[str, float | None]:
        ours = None
        if self.group is not None:
            ours = int((self.group / "cpuacct.usage").read_text()) / 1e9
        return {"machine_cpu": machine_cpu(), "slurm_ours_cpu": ours}

    def since(self, before: dict[str, float | None]) -> dict[str, float | None]:
        now = self.now()
        return {key: None if value is None or before[key] is None else value - before[key]  # type: ignore[operator]
                for key, value in now.items()}

    def close(self) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        for _attempt in range(50):
            try:
                pids = (group / "cgroup.procs").read_text().split()
            except OSError:
                pids = []
            for pid in pids:
                try:
                    (self.ROOT / "cgroup.procs").write_text(pid)
                except OSError:
                    continue  # it ended meanwhile
            try:
                group.rmdir()
                return
            except OSError:
                time.sleep(0.1)  # a process was born in it meanwhile
        log(f"could not remove the cgroup {group}; its processes are moved with: for p in $(cat "
            f"{group}/cgroup.procs); do echo $p > {self.ROOT}/cgroup.procs; done; rmdir {group}")


def background_rate(seconds: float) -> float:
    """CPUs' worth of work the machine does while this benchmark runs nothing (others' work, daemons)."""
    if seconds <= 0:
        return 0.0
    before, start = machine_cpu(), time.perf_counter()
    time.sleep(seconds)
    return (machine_cpu() - before) / (time.perf_counter() - start)


# --- Slurm's SchedulerParameters --------------------------------------------------------------------------

def _scontrol_config() -> dict[str, str]:
    done = subprocess.run(["scontrol", "show", "config"], check=True, capture_output=True, text=True, timeout=60)
    values = {}
    for line in done.stdout.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            values[name.strip()] = value.strip()
    return values


def scheduler_parameters() -> str:
    """The running slurmctld's SchedulerParameters ('' when unset)."""
    value = _scontrol_config().get("SchedulerParameters", "")
    return "" if value == "(null)" else value


class SchedulerConfig:
    """Runs the benchmark with other SchedulerParameters and puts slurm.conf back afterwards."""

    def __init__(self, wanted: str | None) -> None:
        self.wanted = wanted  # None: leave the configuration alone
        self.conf: Path | None = None
        self.original: str | None = None

    @staticmethod
    def _rewrite(text: str, value: str) -> str:
        lines = [line for line in text.splitlines() if not line.strip().lower().startswith("schedulerparameters=")]
        if value:
            at = next((k + 1 for k, line in enumerate(lines) if line.strip().lower().startswith("schedulertype=")),
                      len(lines))
            lines.insert(at, f"SchedulerParameters={value}")
        return "\n".join(lines) + "\n"

    def apply(self) -> str:
        """Change the configuration if needed; what was done, for the log."""
        if self.wanted is None:
            return "left as configured"
        current = scheduler_parameters()
        if current == self.wanted:
            return "already in effect: nothing changed"
        self.conf = Path(_scontrol_config().get("SLURM_CONF", "/etc/slurm/slurm.conf"))
        self.original = self.conf.read_text()
        self._write(self._rewrite(self.original, self.wanted))
        self._reconfigure(self.wanted)
        return f"changed from {current or '(Slurm defaults)'!r} (restored at the end)"

    def restore(self) -> None:
        if self.conf is None or self.original is None:
            return
        original, self.original = self.original, None
        self._write(original)
        expected = ""
        for line in original.splitlines():
            if line.strip().lower().startswith("schedulerparameters="):
                expected = line.split("=", 1)[1].strip()
        self._reconfigure(expected)
        log(f"restored {self.conf} and reconfigured: SchedulerParameters {scheduler_parameters() or '(unset)'}")

    def _write(self, text: str) -> None:
        assert self.conf is not None
        temporary = self.conf.with_name(f".{self.conf.name}.b2bench.{os.getpid()}")
        temporary.write_text(text)
        os.chmod(temporary, self.conf.stat().st_mode & 0o7777)
        os.replace(temporary, self.conf)

    @staticmethod
    def _reconfigure(expected: str) -> None:
        subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True, timeout=120)
        deadline = time.monotonic() + 60
        while scheduler_parameters() != expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"SchedulerParameters still {scheduler_parameters()!r} after scontrol "
                                   f"reconfigure, expected {expected!r}")
            time.sleep(0.5)


def with_batch_sched_delay_0(current: str) -> str:
    items = [item for item in current.split(",") if item and not item.startswith("batch_sched_delay=")]
    return ",".join(["batch_sched_delay=0", *items])


# --- the measurements -------------------------------------------------------------------------------------

def runner_figures(results: Path) -> dict[str, Any]:
    """Time and CPU per task of each process that ran trivial tasks, from the stamps in their outputs."""
    by_runner: dict[str, list[tuple[float, float]]] = {}
    for output in results.rglob("trivial.txt"):
        lines = output.read_text().splitlines()
        if len(lines) < 2:
            continue
        when, runner, cpu = json.loads(lines[1])
        by_runner.setdefault(runner, []).append((when, cpu))
    span = cpu = 0.0
    intervals = 0
    per_runner = []
    for stamps in by_runner.values():
        stamps.sort()
        per_runner.append(len(stamps))
        if len(stamps) > 1:
            span += stamps[-1][0] - stamps[0][0]
            cpu += stamps[-1][1] - stamps[0][1]
            intervals += len(stamps) - 1
    return {"runners": len(by_runner), "tasks_per_runner": sorted(per_runner, reverse=True),
            "s_per_task": span / intervals if intervals else None,
            "cpu_per_task": cpu / intervals if intervals else None}


class Bench:
    """The measurements of one run: they share the folder and the job-name prefix."""

    def __init__(self, args: argparse.Namespace, folder: Path, cluster: Cluster | None, env: dict[str, str],
                 meter: CpuMeter) -> None:
        self.args = args
        self.folder = folder
        self.cluster = cluster
        self.env = env
        self.ok = True
        self.rows: dict[str, dict[str, Any]] = {}
        self.meter = meter

    def _start(self, what: str) -> dict[str, Any]:
        """Wait for a free queue, sample the idle machine; the row's context."""
        others = self.cluster.wait_until_free(600) if self.cluster else None
        background = background_rate(self.args.idle_sample)
        context = {"others_jobs": others, "load": os.getloadavg()[0], "background_cpus": background}
        log(f"{what} (at start: others' live jobs {others if others is not None else '-'}, load "
            f"{context['load']:.2f}, idle machine busy {background:.2f} CPUs)")
        return context

    def _until_queue_free(self, limit: float = 300) -> None:
        """Wait until none of this benchmark's jobs is queued or running (pilots end after the script)."""
        if self.cluster is None:
            return
        deadline = time.monotonic() + limit
        while self.cluster.ours(self.cluster.live_jobs()) and time.monotonic() < deadline:
            time.sleep(0.5)

    def raw(self, n: int) -> dict[str, Any]:
        assert self.cluster is not None
        raw = self.folder / "raw"
        shutil.rmtree(raw, ignore_errors=True)
        for sub in ("jobs", "out", "exit"):
            (raw / sub).mkdir(parents=True)
        jobs = []
        for k in range(1, n + 1):
            wrapper, out, code = raw / "jobs" / f"{k}.sh", raw / "out" / f"{k}.txt", raw / "exit" / str(k)
            wrapper.write_text(f"#!/bin/sh\necho {k} > {out}\necho 0 > {code}\n")
            wrapper.chmod(0o755)
            jobs.append([str(wrapper), str(code), str(out)])
        subprocess.run([jobs[0][0]], check=True, timeout=60)  # warm the caches (and check the script works)
        for _w, code, out in jobs[:1]:
            Path(code).unlink()
            Path(out).unlink()
        context = self._start(f"raw array of {n} echo jobs")
        cpu_before, start = self.meter.now(), time.perf_counter()
        r = measure_raw(self.folder, jobs, self.cluster, f"{self.cluster.prefix}.raw", self.args.timeout)
        row = {**context, "label": "raw array", "n": n, "wall": r["wall"], "cpu_window": time.perf_counter() - start,
               **self.meter.since(cpu_before), "failed": r["failed"], "calls": {"sbatch": 1, "squeue": r["squeue"]},
               "complete": r["failed"] == 0}
        self.ok &= r["failed"] == 0
        log(f"  raw array  wall {row['wall']:.1f} s, CPU: machine {row['machine_cpu']:.1f} s, Slurm + ours "
            f"{fmt(row['slurm_ours_cpu'])} s; failed {r['failed']}/{n}")
        return row

    def b2batch(self, key: str, label: str, n: int, system: str, extra: dict[str, str]) -> dict[str, Any]:
        work = self.folder / key
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        env = {**self.env, **extra, "B2BENCH_N": str(n), "B2BENCH_WORKDIR": str(work), "B2BENCH_SYSTEM": system}
        context = self._start(f"{label}: N={n} on {system}")
        cpu_before, start = self.meter.now(), time.perf_counter()
        stats, wall, code = run_workflow(self.folder, env, "run", self.args.timeout, key)
        self._until_queue_free()
        row = {**context, **stats, "label": label, "n": n, "system": system, "wall": wall, "exit": code,
               "cpu_window": time.perf_counter() - start, **self.meter.since(cpu_before)}
        row["inside"] = runner_figures(work / "result_dir")
        self.ok &= code == 0 and bool(stats["complete"])
        calls = stats["calls"]
        log(f"  {label}  wall {wall:.1f} s (script; process() {stats['process_wall']:.1f} s), CPU: machine "
            f"{row['machine_cpu']:.1f} s, Slurm + ours {fmt(row['slurm_ours_cpu'])} s; exit {code}, complete "
            f"{stats['complete']}, job states {stats['states']}")
        log(f"    steering CPU: process() {stats['process_cpu']:.2f} s = {1000 * stats['process_cpu'] / n:.2f} "
            f"ms/task, "
            f"whole script {stats['script_cpu']:.2f} s; its children {stats['children_cpu']:.2f} s; peak RSS "
            f"{stats['peak_rss_mb']:.0f} MB; scheduler calls {calls}")
        inside = row["inside"]
        log(f"    inside the jobs: {inside['runners']} runner process(es), tasks each "
            f"{inside['tasks_per_runner'][:8]}, "
            f"{fmt_ms(inside['s_per_task'])} per task, CPU {fmt_ms(inside['cpu_per_task'])} per task; timeline (s "
            f"after process() began): first trivial submitted {fmt(stats['first_submitted'])}, last trivial done "
            f"{fmt(stats['last_trivial_done'])}, aggregate done {fmt(stats['aggregate_done'])}")
        if not self.args.keep:
            shutil.rmtree(work, ignore_errors=True)
        return row

    def luigi(self, n: int) -> dict[str, Any]:
        work = self.folder / "luigi"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        env = {**self.env, "B2BENCH_N": str(n), "B2BENCH_WORKDIR": str(work), "B2BENCH_IN_PROCESS": "1"}
        context = self._start(f"plain luigi, workers=1, N={n} in one fresh process")
        stats, wall, code = run_workflow(self.folder, env, "luigi", self.args.timeout, "luigi")
        row = {**context, **stats, "label": "plain luigi", "n": n, "wall": wall, "exit": code,
               "inside": runner_figures(work / "result_dir")}
        self.ok &= code == 0 and bool(stats["complete"])
        log(f"  plain luigi  wall {wall:.1f} s (script; luigi.build {stats['build_wall']:.2f} s = "
            f"{fmt_ms(stats['build_wall'] / n)} per task), {fmt_ms(row['inside']['s_per_task'])} per task in its "
            f"worker loop, CPU {fmt_ms(row['inside']['cpu_per_task'])} per task; complete {stats['complete']}")
        if not self.args.keep:
            shutil.rmtree(work, ignore_errors=True)
        return row


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def fmt_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:.1f} ms"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def verdict(value: float | None, limit: float, n: int, target_n: int) -> str:
    if value is None:
        return "-"
    answer = "yes" if value <= limit else "NO"
    return answer if n >= target_n else f"{answer} (the target is for N={target_n})"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def report(args: argparse.Namespace, bench: Bench, header: str) -> dict[str, Any]:
    rows = bench.rows
    print(header)
    table = [row for key in ("raw", "pilots", "bundles", "steering") if (row := rows.get(key))]
    if table:
        print(f"  {'row':<20} {'N':>6} {'wall s':>8} {'machine CPU s':>14} {'Slurm+ours CPU s':>17} "
              f"{'steering CPU s':>15} {'ms/task':>8} {'sbatch':>7} {'squeue':>7}  complete")
    for row in table:
        steering = row.get("process_cpu")
        cpu_text = "-" if steering is None else f"{steering:.2f}"
        ms_text = "-" if steering is None else f"{1000 * steering / row['n']:.2f}"
        calls = row.get("calls", {})
        print(f"  {row['label']:<20} {row['n']:>6} {row['wall']:>8.1f} {row['machine_cpu']:>14.1f} "
              f"{fmt(row['slurm_ours_cpu']):>17} "
              f"{cpu_text:>15} {ms_text:>8} {calls.get('sbatch', 0):>7} "
              f"{calls.get('squeue', 0):>7}  {row.get('complete')}")
    figures: dict[str, Any] = {"bench": "pilot_throughput", "n": args.n, "pilot_jobs": args.pilot_jobs,
                               "tasks_per_job": args.tasks_per_job, "cpus": os.cpu_count(),
                               "scheduler_parameters": bench.env.get("B2BENCH_SCHEDULER_PARAMETERS")}
    raw, pilots = rows.get("raw"), rows.get("pilots")
    if raw:
        for key in ("pilots", "bundles"):
            row = rows.get(key)
            if not row:
                continue
            o = figures[f"{key}_over_raw"] = {
                "wall": ratio(row["wall"], raw["wall"]), "machine_cpu": ratio(row["machine_cpu"], raw["machine_cpu"]),
                "slurm_ours_cpu": ratio(row["slurm_ours_cpu"], raw["slurm_ours_cpu"])}
            print(f"  ratio {row['label']} / raw array: wall {fmt_ratio(o['wall'])}, CPU: machine "
                  f"{fmt_ratio(o['machine_cpu'])}, Slurm + ours {fmt_ratio(o['slurm_ours_cpu'])}")
        if pilots:
            o = figures["pilots_over_raw"]
            print(f"  target (issue 14): pilots' wall at most 0.5x the raw array: "
                  f"{verdict(o['wall'], 0.5, args.n, 1000)}; CPU at most 2x: machine "
                  f"{verdict(o['machine_cpu'], 2.0, args.n, 1000)}, Slurm + ours "
                  f"{verdict(o['slurm_ours_cpu'], 2.0, args.n, 1000)}")
    steering = rows.get("steering")
    if steering:
        per_task = steering["process_cpu"] / steering["n"]
        figures["steering_ms_per_task"] = 1000 * per_task
        figures["steering_script_ms_per_task"] = 1000 * steering["script_cpu"] / steering["n"]
        print(f"  steering CPU in pilot mode, N={steering['n']} on {steering['system']}: process() "
              f"{steering['process_cpu']:.2f} s = {1000 * per_task:.2f} ms/task (whole script "
              f"{figures['steering_script_ms_per_task']:.2f} ms/task); target at most 2 ms/task: "
              f"{verdict(1000 * per_task, 2.0, steering['n'], 10_000)}")
    luigi = rows.get("luigi")
    if luigi:
        reference = luigi["inside"]
        figures["luigi_s_per_task"] = reference["s_per_task"]
        figures["luigi_cpu_per_task"] = reference["cpu_per_task"]
        figures["luigi_build_s_per_task"] = luigi["build_wall"] / luigi["n"]
        print(f"  per task, plain luigi (N={luigi['n']}, workers=1): {fmt_ms(reference['s_per_task'])} in its worker "
              f"loop (CPU {fmt_ms(reference['cpu_per_task'])}); luigi.build "
              f"{fmt_ms(figures['luigi_build_s_per_task'])}")
        for key in ("pilots", "steering", "bundles"):
            row = rows.get(key)
            if not row:
                continue
            inside = row["inside"]
            wall, cpu = ratio(inside["s_per_task"], reference["s_per_task"]), ratio(inside["cpu_per_task"],
                                                                                 reference["cpu_per_task"])
            figures[f"inside_{key}"] = {**inside, "over_luigi": wall, "cpu_over_luigi": cpu}
            print(f"  per task inside {row['label']} (N={row['n']}, {inside['runners']} runners): "
                  f"{fmt_ms(inside['s_per_task'])} (CPU {fmt_ms(inside['cpu_per_task'])}); ratio to plain luigi "
                  f"{fmt_ratio(wall)} (CPU {fmt_ratio(cpu)})")
    keep = ("label", "n", "system", "wall", "process_wall", "cpu_window", "machine_cpu", "slurm_ours_cpu",
            "background_cpus", "others_jobs", "load", "process_cpu", "script_cpu", "children_cpu", "peak_rss_mb",
            "calls", "states", "complete", "failed", "build_wall", "build_cpu", "first_submitted",
            "last_trivial_done", "aggregate_done")
    figures["rows"] = {key: {k: row[k] for k in keep if k in row} for key, row in rows.items()}
    figures["ok"] = bench.ok
    print(json.dumps(figures, default=str))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="trivial tasks of parts 1 and 3 (default 1000)")
    parser.add_argument("--pilot-jobs", type=int, default=2, help="pilot_jobs (default 2)")
    parser.add_argument("--tasks-per-job", type=int, default=0,
                        help="also measure bundles with tasks_per_job = K in part 1 (default 0: no bundles row)")
    parser.add_argument("--steering-n", type=int, default=10_000, help="trivial tasks of part 2 (default 10000)")
    parser.add_argument("--steering-system", default="slurm", help="batch system of part 2: slurm (default) or local")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"which parts, comma-separated (default {','.join(PARTS)})")
    parser.add_argument("--pilot-idle-timeout", type=float, default=None,
                        help="pilot_idle_timeout (default: b2batch's)")
    parser.add_argument("--heartbeat-timeout", type=float, default=None, help="heartbeat_timeout (default: b2batch's)")
    scheduling = parser.add_mutually_exclusive_group()
    scheduling.add_argument("--batch-sched-delay-0", action="store_true",
                            help="make sure slurmctld runs with batch_sched_delay=0 (restored at the end)")
    scheduling.add_argument("--scheduler-parameters", default=None, metavar="VALUE",
                            help="run with SchedulerParameters=VALUE ('default': unset); restored at the end")
    parser.add_argument("--idle-sample", type=float, default=3.0,
                        help="seconds the idle machine's CPU use is sampled before each row, to show how busy "
                             "others keep it (default 3; 0: not sampled)")
    parser.add_argument("--no-cgroup", action="store_true",
                        help="do not move the Slurm daemons into a cpuacct cgroup (no 'Slurm + ours' CPU figure)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per measurement (default 3600)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, job files)")
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if parts - set(PARTS):
        parser.error(f"unknown part(s) {sorted(parts - set(PARTS))}; choose from {', '.join(PARTS)}")
    if args.steering_n <= 0:
        parts.discard("steering")

    # Part 3 without part 1 takes its pilots row from a run on --steering-system.
    needs_slurm = "throughput" in parts or (args.steering_system == "slurm" and bool(parts & {"steering", "overhead"}))
    if needs_slurm:
        for tool in ("sbatch", "squeue", "scancel", "scontrol"):
            if shutil.which(tool) is None:
                print(f"pilot_throughput: {tool} is not on PATH; start the cluster with tests/clusters/slurm.sh start",
                      file=sys.stderr)
                return 1
    prefix = f"b2benchp{uuid.uuid4().hex[:8]}"
    cluster = Cluster(prefix) if needs_slurm else None
    folder = Path(tempfile.mkdtemp(prefix="b2bench-pilot-"))
    (folder / f"{TASK_MODULE}.py").write_text(TASKS)
    (folder / "workflow.py").write_text(WORKFLOW)
    env = {**os.environ, "B2BENCH_JOB_NAME": prefix}
    for name in ("B2BATCH_SETTINGS", "B2LUIGI_SETTINGS_JSON", "B2BENCH_IN_PROCESS"):
        env.pop(name, None)
    for name, value in (("PILOT_IDLE_TIMEOUT", args.pilot_idle_timeout), ("HEARTBEAT_TIMEOUT", args.heartbeat_timeout)):
        if value is not None:
            env[f"B2BENCH_{name}"] = str(value)
    pilots = {"B2BENCH_PILOT_JOBS": str(args.pilot_jobs), "B2BENCH_TASKS_PER_JOB": "1"}
    wanted = None
    if needs_slurm and (args.batch_sched_delay_0 or args.scheduler_parameters is not None):
        wanted = (with_batch_sched_delay_0(scheduler_parameters()) if args.batch_sched_delay_0
                  else "" if args.scheduler_parameters == "default" else args.scheduler_parameters)
    config = SchedulerConfig(wanted)
    meter = CpuMeter(f"{prefix}", not args.no_cgroup)
    bench = Bench(args, folder, cluster, env, meter)
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if needs_slurm:
            log(f"SchedulerParameters: {config.apply()}; in effect: {scheduler_parameters() or '(Slurm defaults)'}")
            env["B2BENCH_SCHEDULER_PARAMETERS"] = scheduler_parameters()
        log(f"folder {folder}, job names {prefix}*; parts {', '.join(p for p in PARTS if p in parts)}; CPU of "
            f"Slurm + ours: {meter.note}")
        subprocess.run([sys.executable, "-c", "import b2batch, luigi"], check=True, timeout=120)  # warm the caches
        if "throughput" in parts:
            bench.rows["raw"] = bench.raw(args.n)
            bench.rows["pilots"] = bench.b2batch("pilots", f"pilots (M={args.pilot_jobs})", args.n, "slurm", pilots)
            if args.tasks_per_job > 0:
                bench.rows["bundles"] = bench.b2batch(
                    "bundles", f"bundles (K={args.tasks_per_job})", args.n, "slurm",
                    {"B2BENCH_PILOT_JOBS": "0", "B2BENCH_TASKS_PER_JOB": str(args.tasks_per_job)})
        if "steering" in parts:
            bench.rows["steering"] = bench.b2batch("steering", f"steering (M={args.pilot_jobs})", args.steering_n,
                                                   args.steering_system, pilots)
        if "overhead" in parts:
            if "pilots" not in bench.rows and "steering" not in bench.rows:
                bench.rows["pilots"] = bench.b2batch("pilots", f"pilots (M={args.pilot_jobs})", args.n,
                                                     args.steering_system, pilots)
            bench.rows["luigi"] = bench.luigi(args.n)
    except KeyboardInterrupt:
        log("interrupted")
        bench.ok = False
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        log(f"error: {e}")
        bench.ok = False
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        if cluster is not None:
            cancelled = cluster.cancel_ours()
            if cancelled:
                log(f"cancelled {cancelled} leftover job(s)/array(s) named {prefix}*")
        meter.close()
        try:
            config.restore()
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            log(f"could not restore the Slurm configuration: {e}")
            bench.ok = False
        if args.keep:
            log(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    header = (f"pilot_throughput: N={args.n} trivial tasks + 1 aggregate; pilot_jobs {args.pilot_jobs}"
              f"{f', tasks_per_job {args.tasks_per_job}' if args.tasks_per_job else ''}; steering N="
              f"{args.steering_n if 'steering' in parts else '-'} on {args.steering_system}; SchedulerParameters "
              f"{env.get('B2BENCH_SCHEDULER_PARAMETERS') or '-'}; {os.cpu_count()} CPUs; numbers are noisy when "
              f"others use the machine")
    report(args, bench, header)
    return 0 if bench.ok else 1


if __name__ == "__main__":
    sys.exit(main())
