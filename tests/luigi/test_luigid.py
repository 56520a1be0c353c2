"""--scheduler-host/--scheduler-port connect to a real luigi central scheduler (luigid) started here."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import clean_env

pytestmark = pytest.mark.skipif(shutil.which("luigid") is None, reason="luigid is not installed")

# luigi retries a scheduler it cannot reach 3 times, 30 s apart; a user's luigi.cfg can make that quick.
FAST_RETRIES = "[core]\nrpc-retry-attempts = 1\nrpc-retry-wait = 1\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def api(port: int, method: str, **data: object) -> dict:
    query = urllib.parse.urlencode({"data": json.dumps(data)})
    with urllib.request.urlopen(f"http://localhost:{port}/api/{method}?{query}", timeout=5) as response:
        return json.loads(response.read())["response"]


@pytest.fixture
def luigid(tmp_path: Path) -> Iterator[int]:
    """A luigid on a free localhost port, with its files in the test's folder; its port."""
    folder = tmp_path / "luigid"
    (folder / "logs").mkdir(parents=True)
    port = free_port()
    with open(folder / "output", "w") as output:
        server = subprocess.Popen(
            ["luigid", "--port", str(port), "--address", "localhost", "--logdir", str(folder / "logs"),
             "--pidfile", str(folder / "luigid.pid"), "--state-path", str(folder / "state.pickle")],
            cwd=folder, env=clean_env(), stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                api(port, "task_list", status="DONE")
                break
            except OSError:
                assert server.poll() is None, \
                    f"luigid exited with {server.returncode}: {(folder / 'output').read_text()}"
                assert time.monotonic() < deadline, "luigid did not answer within 30 s"
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_run_goes_through_the_central_scheduler(workflow, luigid: int) -> None:
    flow = workflow("flags.py")
    run = flow.run("--scheduler-host", "localhost", "--scheduler-port", str(luigid), "--my-flag", "central")
    assert run.returncode == 0, run.stderr
    done = api(luigid, "task_list", status="DONE")
    families = sorted(task["name"] for task in done.values())
    assert families == ["Part", "Part", "Part", "Total"]
    assert {task["params"]["tag"] for task in done.values()} == {"central"}
    assert (flow.folder / "results" / "tag=central" / "total.json").is_file()


def test_batch_run_goes_through_the_central_scheduler(workflow, luigid: int) -> None:
    flow = workflow("flags.py")
    run = flow.run("--batch", "--batch-system", "local", "--scheduler-port", str(luigid), "--count", "1",
                   "--my-flag", "batch")
    assert run.returncode == 0, run.stderr
    done = api(luigid, "task_list", status="DONE")
    assert sorted(task["name"] for task in done.values()) == ["Part", "Total"]
    assert (flow.folder / "task_files" / "Total").is_dir()  # they really ran as jobs


def test_unreachable_scheduler_fails_clearly_instead_of_running_locally(workflow) -> None:
    flow = workflow("flags.py")
    (flow.folder / "luigi.cfg").write_text(FAST_RETRIES)
    port = free_port()  # nothing listens here
    run = flow.run("--scheduler-host", "localhost", "--scheduler-port", str(port), timeout=60)
    assert run.returncode != 0
    assert f"http://localhost:{port}" in run.stderr
    assert "RPCError" in run.stderr or "remote scheduler" in run.stderr
    assert not (flow.folder / "results").exists()
