#!/usr/bin/env python3
"""What following a run costs its steering process: a ``--n`` task pilot run (default 10,000 trivial tasks and
one that requires them all; ``pilot_jobs`` 2 on ``--system``, default ``local``) three times, each in a fresh
folder of its own:

  off        the setting ``live_state`` false: no live-state file;
  on         ``live_state`` true: the steering process writes ``b2batch-live-*.json`` (at most once a second);
  on+reader  the same, with a reader process that does what ``b2batch monitor`` does each second (reads the
             file again, finds the nodes of the running jobs in their logs, renders the view, into /dev/null).

Each row: the wall time of the workflow script, the steering process's own CPU time (``getrusage(RUSAGE_SELF)``
at the end of the script: not the pilots', not their tasks'), the number of writes and the CPU time the writes
took in the writing thread (measured there, ``time.thread_time``), and that as a share of the steering CPU.
The extra steering CPU of ``on`` over ``off`` is given too, but the machine is shared and two runs differ by
more than the writer costs: the writer's own CPU is the figure to trust. Target (issue 29): under 2% extra
steering CPU. The last line is one JSON line of all figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WORKFLOW = textwrap.dedent('''
    import json, resource, sys, time
    import b2batch

    class Tiny(b2batch.Task):
        n = b2batch.IntParameter()
        def output(self):
            yield self.add_to_output("out.txt")
        def run(self):
            with open(self.get_output_file_name("out.txt"), "w") as f:
                f.write(str(self.n))

    class Aggregate(b2batch.Task):
        n = b2batch.IntParameter()
        def requires(self):
            for i in range(self.n):
                yield Tiny(n=i)
        def output(self):
            yield self.add_to_output("sum.txt")
        def run(self):
            with open(self.get_output_file_name("sum.txt"), "w") as f:
                f.write("done")

    if __name__ == "__main__":
        started = time.monotonic()
        b2batch.process(Aggregate(n=int(sys.argv[1])), batch=True, workers=int(sys.argv[1]) + 1,
                        ignore_additional_command_line_args=True, exit_on_failure=False)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print("BENCH " + json.dumps({"wall": time.monotonic() - started, "cpu": usage.ru_utime + usage.ru_stime}))
''')

READER = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from rich.console import Console
    from b2batch.display.live_view import Monitor

    console = Console(file=open("/dev/null", "w"), width=100, height=40, force_terminal=True)
    monitor = Monitor(Path(sys.argv[1]), console)
    while True:
        monitor.refresh()
        console.print(monitor.view())
        time.sleep(1.0)
''')


def run(mode: str, n: int, system: str, root: Path) -> dict[str, float]:
    folder = root / mode
    folder.mkdir()
    (folder / "flow.py").write_text(WORKFLOW)
    (folder / "settings.json").write_text(json.dumps({"batch_system": system, "pilot_jobs": 2,
                                                      "live_state": mode != "off", "run_summary": False}))
    (folder / "logs").mkdir()
    reader = None
    if mode == "on+reader":
        reader = subprocess.Popen([sys.executable, "-c", READER, str(folder / "logs")], cwd=folder)
    try:
        done = subprocess.run([sys.executable, "flow.py", str(n)], cwd=folder, capture_output=True, text=True)
    finally:
        if reader is not None:
            reader.terminate()
            reader.wait()
    line = next((line for line in done.stdout.splitlines() if line.startswith("BENCH ")), None)
    if line is None:
        sys.exit(f"{mode}: the workflow printed no figures (exit {done.returncode}):\n{done.stderr[-3000:]}")
    row = json.loads(line[6:])
    states = list((folder / "logs").glob("b2batch-live-*.json"))
    state = json.loads(states[0].read_text()) if states else {}
    row.update(writes=state.get("writes", 0), write_cpu=state.get("write_cpu_seconds", 0.0),
               done=sum(c.get("done", 0) for s in state.get("counts", {}).values() for c in s.values()))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="tasks (default 10,000)")
    parser.add_argument("--system", default="local", help="batch system of the pilots (default local)")
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="b2batch-monitor-bench-") as tmp:
        for mode in ("off", "on", "on+reader"):
            started = time.time()
            rows[mode] = run(mode, args.n, args.system, Path(tmp))
            print(f"{mode:10s} wall {rows[mode]['wall']:7.1f} s  steering CPU {rows[mode]['cpu']:7.2f} s  "
                  f"writes {rows[mode]['writes']:4d}  writer CPU {rows[mode]['write_cpu']:6.3f} s "
                  f"({100 * rows[mode]['write_cpu'] / rows[mode]['cpu']:.2f}% of steering)  "
                  f"[{time.time() - started:.0f} s, load {os.getloadavg()[0]:.1f}]", flush=True)
    off = rows["off"]["cpu"]
    for mode in ("on", "on+reader"):
        rows[mode]["extra_vs_off_percent"] = round(100 * (rows[mode]["cpu"] - off) / off, 2)
        rows[mode]["writer_percent"] = round(100 * rows[mode]["write_cpu"] / rows[mode]["cpu"], 3)
        print(f"{mode}: writer {rows[mode]['writer_percent']:.2f}% of the steering CPU (target < 2%); "
              f"steering CPU {rows[mode]['extra_vs_off_percent']:+.1f}% against the off run (noisy)")
    print(json.dumps({"n": args.n, "system": args.system, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
