"""How long a 1,000-task workflow's ``--dry-run`` takes with its results on a remote server, against the same
workflow with local results, measured in the same run. Target: the ratio under 2.

    python bench/remote_dry_run.py root://localhost:1094//bench   # XRootD (tests/clusters/xrootd.sh start)
    python bench/remote_dry_run.py dav://127.0.0.1:8765/bench     # a WebDAV server
    python bench/remote_dry_run.py --webdav                       # starts its own wsgidav server

Each case is measured three times: with every output present ("All tasks are finished!": only the top task
is checked), with every output but the top task's (all 1,000 are checked: the result folder is listed) and
with none. The outputs are made first (on the server: small files, uploaded one by one). Local and remote
runs alternate (the machine's load changes); prints one line per case and the ratio remote/local of the best
of ``--repeat`` runs. ``--profile`` prints where a remote dry run spends its time instead (cProfile).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = textwrap.dedent('''
    import sys
    import b2batch

    b2batch.set_setting("result_dir", sys.argv.pop(1))


    class Leaf(b2batch.Task):
        i = b2batch.IntParameter()

        def output(self):
            yield self.add_to_output("leaf.txt")

        def run(self):
            pass


    class Top(b2batch.Task):
        def requires(self):
            for i in range(999):
                yield Leaf(i=i)

        def output(self):
            yield self.add_to_output("top.txt")

        def run(self):
            pass


    if __name__ == "__main__":
        b2batch.process(Top())
''')


def dry_run(script: Path, result_dir: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), result_dir, "--dry-run"], capture_output=True, text=True,
                          env=env, cwd=script.parent, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"the dry run against {result_dir} failed:\n{done.stderr[-3000:]}")
    return elapsed, done.stdout.strip().splitlines()[-1]


def fill(result_dir: str, folder: Path) -> None:
    """Put every output of the workflow under ``result_dir`` (local or remote)."""
    sys.path.insert(0, str(REPO))
    from b2batch.remote import urls
    from b2batch.remote.outputs import file_system_for

    names = [f"i={i}/leaf.txt" for i in range(999)] + ["top.txt"]
    if not urls.is_remote(result_dir):
        for name in names:
            (Path(result_dir) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(result_dir) / name).write_text("x")
        return
    fs = file_system_for(result_dir)
    local = folder / "x.txt"
    local.write_text("x")
    for name in names:
        fs.put_atomically(str(local), urls.join(result_dir, name))


def remove_top(result_dir: str) -> None:
    from b2batch.remote import urls
    from b2batch.remote.outputs import file_system_for

    if urls.is_remote(result_dir):
        file_system_for(result_dir).remove(urls.join(result_dir, "top.txt"))
    else:
        (Path(result_dir) / "top.txt").unlink()


def profile(script: Path, result_dir: str, lines: int = 40) -> None:
    """Print the functions a dry run against ``result_dir`` spends most time in (cumulative)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "cProfile", "-s", "cumulative", str(script), result_dir,
                           "--dry-run"], capture_output=True, text=True, env=env, cwd=script.parent, check=False)
    print("\n".join(line for line in done.stdout.splitlines() if "importlib._bootstrap" not in line)[:200 * lines])


def empty(result_dir: str) -> None:
    from b2batch.remote import urls
    from b2batch.remote.outputs import file_system_for

    if urls.is_remote(result_dir):
        file_system_for(result_dir).remove(result_dir)
    else:
        subprocess.run(["rm", "-rf", result_dir], check=True)


def start_wsgidav(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "wsgidav.server.server_cli", "--host", "127.0.0.1", "--port",
                               str(port), "--root", str(root), "--auth", "anonymous", "--no-config", "-q"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server, f"dav://127.0.0.1:{port}/bench"
        time.sleep(0.1)
    server.terminate()
    sys.exit("wsgidav did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="the remote result_dir (a folder the benchmark may fill and remove)")
    parser.add_argument("--webdav", action="store_true", help="start a wsgidav server and use it")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true",
                        help="profile one remote dry run per case instead of timing (cProfile, cumulative)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="b2batch-bench-") as folder_name:
        folder = Path(folder_name)
        server = None
        if args.webdav:
            (folder / "dav").mkdir()
            server, url = start_wsgidav(folder / "dav")
        elif args.url:
            url = args.url
        else:
            parser.error("give a remote result_dir URL or --webdav")
        try:
            script = folder / "workflow.py"
            script.write_text(WORKFLOW)
            local = str(folder / "results")
            for state in ("all complete", "top missing", "none complete"):
                if state == "all complete":
                    fill(local, folder)
                    fill(url, folder)
                elif state == "top missing":
                    remove_top(local)
                    remove_top(url)
                else:
                    empty(local)
                    empty(url)
                if args.profile:
                    print(f"--- {state}: {url}")
                    profile(script, url)
                    continue
                runs: dict[str, list[tuple[float, str]]] = {"local": [], "remote": []}
                for _ in range(args.repeat):  # alternating, so that both meet the same load
                    runs["local"].append(dry_run(script, local))
                    runs["remote"].append(dry_run(script, url))
                times = {name: min(t for t, _ in done) for name, done in runs.items()}
                for name, result_dir in (("local", local), ("remote", url)):
                    print(f"{state:14s} {name:6s} {result_dir}: best {times[name]:.2f} s of {args.repeat} "
                          f"({runs[name][0][1]})")
                print(f"{state:14s} ratio remote/local: {times['remote'] / times['local']:.2f} (target < 2)")
            empty(url)
        finally:
            if server is not None:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    main()
