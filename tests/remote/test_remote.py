"""Remote outputs (b2batch.remote) against real servers: the XRootD server of tests/clusters/xrootd.sh and a
wsgidav WebDAV server started here. Quick tests use the file systems directly; the slow ones run the workflow
tests/workflows/remote_chain.py locally, on the real Slurm, killed mid-write, and through a server outage."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import b2batch
from b2batch import remote
from b2batch.remote import RetryPolicy, bulk_checks
from b2batch.remote.backoff import RemoteError
from conftest import clean_env, wait_for

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
XROOTD_SCRIPT = TESTS / "clusters" / "xrootd.sh"
SLURM_SCRIPT = TESTS / "clusters" / "slurm.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    """Workflow subprocesses (and their Slurm jobs) import this working tree's b2batch."""
    return clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])), **extra)


# --- servers ------------------------------------------------------------------------------------------------

def _xrootd(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(XROOTD_SCRIPT), command], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env}, check=False)


@pytest.fixture(scope="module")
def xrootd_server() -> str:
    pytest.importorskip("XRootD", reason="the xrootd bindings are not installed (pip install 'b2batch[xrootd]')")
    if os.geteuid() != 0 or _xrootd("status").returncode != 0:
        pytest.skip("the local XRootD server is not running (bash tests/clusters/xrootd.sh start)")
    return "root://localhost:1094"


class WebDAVServer:
    """A wsgidav server on localhost serving ``root``; stop() and start() again on the same port."""

    def __init__(self, root: Path) -> None:
        self.root, self.port, self.process = root, _free_port(), None
        self.url = f"dav://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wsgidav.server.server_cli", "--host", "127.0.0.1", "--port", str(self.port),
             "--root", str(self.root), "--auth", "anonymous", "--no-config", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._answers, timeout=30, what=f"wsgidav on port {self.port}")

    def _answers(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture(scope="module")
def webdav_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDAVServer]:
    pytest.importorskip("webdav4", reason="webdav4 is not installed (pip install 'b2batch[webdav]')")
    pytest.importorskip("wsgidav", reason="wsgidav is not installed (pip install 'b2batch[test]')")
    server = WebDAVServer(tmp_path_factory.mktemp("webdav-root"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["xrootd", "webdav"])
def result_url(request: pytest.FixtureRequest) -> str:
    """A fresh folder on each server, e.g. root://localhost:1094//b2batch-tests/<id>."""
    if request.param == "xrootd":
        return f"{request.getfixturevalue('xrootd_server')}//b2batch-tests/{uuid.uuid4().hex[:12]}"
    return f"{request.getfixturevalue('webdav_server').url}/b2batch-tests/{uuid.uuid4().hex[:12]}"


def _fs(url: str, attempts: int = 3) -> remote.RemoteFileSystem:
    kind = remote.urls.parse(url).kind
    system = remote.XRootDSystem if kind == "xrootd" else remote.WebDAVSystem
    return system(remote.urls.parse(url).server, retry=RetryPolicy(attempts=attempts, first_wait=0.1, max_wait=0.5))


# --- quick tests ----------------------------------------------------------------------------------------------

class Numbered(b2batch.Task):
    i = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("n.txt")


def test_remote_result_dir_lays_out_urls() -> None:
    b2batch.set_setting("result_dir", "root://eos.example.org:1094//store/user/me/run")
    target = Numbered(i=3).output().__next__()["n.txt"]
    assert isinstance(target, remote.XRootDTarget)
    assert target.path == "root://eos.example.org:1094//store/user/me/run/i=3/n.txt"
    b2batch.set_setting("result_dir", "davs://dav.example.org/data/run")
    assert Numbered(i=4).get_output_file_name("n.txt") == "davs://dav.example.org/data/run/i=4/n.txt"


def test_missing_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "XRootD", None)  # as if the bindings were not installed
    monkeypatch.setitem(sys.modules, "webdav4.client", None)
    with pytest.raises(RemoteError, match=r"pip install 'b2batch\[xrootd\]'"):
        remote.XRootDSystem("root://localhost:1094")
    with pytest.raises(RemoteError, match=r"pip install 'b2batch\[webdav\]'"):
        remote.WebDAVSystem("davs://localhost")


def test_bad_retry_setting_names_task_value_and_fix() -> None:
    b2batch.set_setting("result_dir", "root://localhost:1094//x")
    b2batch.set_setting("remote_retries", 0)
    with pytest.raises(b2batch.SettingError, match=r"Numbered\(i=1\).*'remote_retries' is 0.*e\.g\."):
        list(Numbered(i=1).output())


class OwnRetries(b2batch.Task):
    remote_retries = 2

    def output(self):
        yield self.add_to_output("n.txt")

    @b2batch.on_temporary_files
    def run(self):
        Path(self.get_output_file_name("n.txt")).write_text("n")


def test_a_tasks_own_remote_retries_are_the_tries_of_its_uploads(webdav_server: WebDAVServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """on_temporary_files uploads with the task's FileSettings: its own remote_retries, not the process's."""
    from b2batch.remote.backoff import TransientRemoteError

    tries = []

    def failing(self: remote.RemoteFileSystem, local: str, path: str) -> None:
        tries.append(path)
        raise TransientRemoteError(f"upload to {path}: connection reset by peer")

    monkeypatch.setattr(remote.WebDAVSystem, "_upload", failing)
    b2batch.set_setting("result_dir", f"{webdav_server.url}/b2batch-tests/{uuid.uuid4().hex[:12]}")
    b2batch.set_setting("remote_retries", 4)
    with pytest.raises(RemoteError, match="failed 2 times"):
        OwnRetries().run()
    assert len(tries) == 2, tries


def test_file_system_operations(result_url: str, tmp_path: Path) -> None:
    fs = _fs(result_url)
    local = tmp_path / "a.txt"
    local.write_text("payload")
    fs.copy_file_to_remote(str(local), f"{result_url}/x/a.txt")
    assert fs.exists(f"{result_url}/x/a.txt") and fs.isdir(f"{result_url}/x")
    assert not fs.exists(f"{result_url}/x/missing.txt")
    with pytest.raises(Exception, match="exists"):
        fs.copy_file_to_remote(str(local), f"{result_url}/x/a.txt")
    assert fs.listdir(f"{result_url}/x") == [f"{result_url}/x/a.txt"]  # no temporary upload left behind
    wanted = [f"{result_url}/x/a.txt", f"{result_url}/x/b.txt"]
    assert fs.exists_many(wanted) == {wanted[0]}
    fs.move(f"{result_url}/x/a.txt", f"{result_url}/x/b.txt")
    fs.copy_file_from_remote(f"{result_url}/x/b.txt", str(tmp_path / "back.txt"))
    assert (tmp_path / "back.txt").read_text() == "payload"
    fs.remove(result_url)
    assert not fs.exists(result_url)


def test_b2luigi_style_targets(result_url: str) -> None:
    """``add_to_output(name, XRootDTarget, file_system=fs)`` with a server path as result_dir, as in b2luigi."""
    fs = _fs(result_url)
    parsed = remote.urls.parse(result_url)
    target_class = remote.XRootDTarget if parsed.kind == "xrootd" else remote.WebDAVTarget

    class Written(b2batch.Task):
        def output(self):
            yield self.add_to_output("w.txt", target_class, file_system=fs)

    b2batch.set_setting("result_dir", parsed.path)
    target = next(Written().output())["w.txt"]
    assert target.path == f"{result_url}/w.txt" and not target.exists()
    with target.temporary_path() as path:
        Path(path).write_text("hello")
        assert not target.exists()  # nothing visible before the context ends
    assert target.exists() and Written().complete()
    with target.open("r") as f:
        assert f.read() == "hello"
    with target.get_temporary_input() as path:
        assert Path(path).read_text() == "hello"
    Written().remove_output()
    assert not target.exists()


def test_bulk_checks_list_each_result_folder_once(result_url: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fs = _fs(result_url)
    local = tmp_path / "n.txt"
    local.write_text("1")
    for i in range(0, 20, 2):
        fs.put_atomically(str(local), f"{result_url}/i={i}/n.txt")
    b2batch.set_setting("result_dir", result_url)
    tasks = [Numbered(i=i) for i in range(20)]
    listings = []
    original = type(fs)._list

    def counting(self: remote.RemoteFileSystem, path: str, recursive: bool) -> object:
        listings.append(path)
        return original(self, path, recursive)

    monkeypatch.setattr(type(fs), "_list", counting)  # counts the calls; the real server answers
    with bulk_checks():
        done = [task.complete() for task in tasks]
    assert done == [i % 2 == 0 for i in range(20)]
    assert listings == [remote.urls.parse(result_url).path]
    assert [task.complete() for task in tasks[:2]] == [True, False]  # outside bulk checks: asked each time


def _counting(monkeypatch: pytest.MonkeyPatch, fs: remote.RemoteFileSystem) -> dict[str, list[str]]:
    """Record the paths of the stat and list requests of ``fs``'s class (the real server answers them)."""
    calls: dict[str, list[str]] = {"stat": [], "list": []}
    original_stat, original_list = type(fs)._stat, type(fs)._list

    def stat(self: remote.RemoteFileSystem, path: str) -> object:
        calls["stat"].append(path)
        return original_stat(self, path)

    def listing(self: remote.RemoteFileSystem, path: str, recursive: bool) -> object:
        calls["list"].append(path)
        return original_list(self, path, recursive)

    monkeypatch.setattr(type(fs), "_stat", stat)
    monkeypatch.setattr(type(fs), "_list", listing)
    return calls


def test_bulk_checks_of_a_complete_top_task_list_nothing(result_url: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A complete workflow's --dry-run checks its top task only: one small request, not a listing of all."""
    fs = _fs(result_url)
    local = tmp_path / "n.txt"
    local.write_text("1")
    for i in range(5):
        fs.put_atomically(str(local), f"{result_url}/i={i}/n.txt")
    b2batch.set_setting("result_dir", result_url)
    calls = _counting(monkeypatch, fs)
    with bulk_checks():
        assert Numbered(i=3).complete()
    assert calls == {"stat": [f"{remote.urls.parse(result_url).path}/i=3/n.txt"], "list": []}


def test_bulk_checks_list_in_the_background_after_a_miss(result_url: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fs = _fs(result_url)
    local = tmp_path / "n.txt"
    local.write_text("1")
    fs.put_atomically(str(local), f"{result_url}/i=0/n.txt")
    fs.put_atomically(str(local), f"{result_url}/i=7/n.txt")
    b2batch.set_setting("result_dir", result_url)
    calls = _counting(monkeypatch, fs)
    with bulk_checks():
        assert Numbered(i=0).complete() and not Numbered(i=1).complete()  # the miss starts the listing
        assert [Numbered(i=i).complete() for i in range(2, 10)] == [i == 7 for i in range(2, 10)]
    root = remote.urls.parse(result_url).path
    assert calls == {"stat": [f"{root}/i=0/n.txt", f"{root}/i=1/n.txt"], "list": [root]}


def test_b2luigi_style_targets_are_checked_from_one_listing_of_the_result_folder(
        result_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``add_to_output(name, XRootDTarget, file_system=fs)`` with a server path as result_dir: the targets know
    their result folder, so a miss lists it once instead of one folder (or file) per task."""
    fs = _fs(result_url)
    parsed = remote.urls.parse(result_url)
    target_class = remote.XRootDTarget if parsed.kind == "xrootd" else remote.WebDAVTarget

    class Styled(b2batch.Task):
        i = b2batch.IntParameter()

        def output(self):
            yield self.add_to_output("s.txt", target_class, file_system=fs)

    local = tmp_path / "s.txt"
    local.write_text("1")
    for i in (0, 5):
        fs.put_atomically(str(local), f"{result_url}/i={i}/s.txt")
    b2batch.set_setting("result_dir", parsed.path)
    calls = _counting(monkeypatch, fs)
    with bulk_checks():
        assert [Styled(i=i).complete() for i in range(8)] == [i in (0, 5) for i in range(8)]
    assert calls["list"] == [parsed.path]
    assert len(calls["stat"]) <= 2  # the first checks ask for their file, until one misses


def test_failed_background_listing_is_retried_then_reported_in_one_line(result_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from b2batch.remote.existence import remote_checks
    from b2batch.remote.backoff import TransientRemoteError

    tries = []

    def failing(self: remote.RemoteFileSystem, path: str, recursive: bool) -> object:
        tries.append(path)
        raise TransientRemoteError(f"list {self.url(path)}: connection reset by peer")

    monkeypatch.setattr(type(_fs(result_url)), "_list", failing)
    b2batch.set_setting("result_dir", result_url)
    b2batch.set_setting("remote_retries", 2)
    with pytest.raises(SystemExit) as stopped, remote_checks():
        assert not Numbered(i=1).complete()  # answered by one stat; the listing starts in the background
        Numbered(i=2).complete()  # needs the listing: its error ends the command here
    message = str(stopped.value)
    assert len(tries) == 2 and "\n" not in message, (tries, message)
    assert message.startswith(f"ERROR: list of {result_url} failed 2 times") and "runs and is reachable" in message


def test_webdav_checks_need_no_httpx(webdav_server: WebDAVServer) -> None:
    """Existence checks and listings go over http.client: importing httpx and httpcore (which imports trio
    and anyio) took longer than a whole --dry-run on local files."""
    url = f"{webdav_server.url}/b2batch-tests/{uuid.uuid4().hex[:12]}"
    script = f"""
import sys
import b2batch
from b2batch.remote import bulk_checks

class Numbered(b2batch.Task):
    i = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("n.txt")

b2batch.set_setting("result_dir", {url!r})
with bulk_checks():
    print(sum(Numbered(i=i).complete() for i in range(10)))
print(sorted(m for m in ("httpx", "httpcore", "webdav4.client") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(), timeout=120,
                          check=False)
    assert done.returncode == 0 and done.stdout.split("\n")[:2] == ["0", "[]"], done.stdout + done.stderr


def test_webdav_checks_through_httpx_with_an_auth_object(webdav_server: WebDAVServer, tmp_path: Path) -> None:
    """An httpx auth object (not a (user, password) pair) sends the queries through httpx instead."""
    import httpx

    url = f"{webdav_server.url}/b2batch-tests/{uuid.uuid4().hex[:12]}"
    fs = remote.WebDAVSystem(webdav_server.url, auth=httpx.BasicAuth("user", "secret"))
    assert fs._queries is None
    (tmp_path / "a.txt").write_text("a")
    fs.put_atomically(str(tmp_path / "a.txt"), f"{url}/x/a.txt")
    root = remote.urls.parse(url).path
    assert fs.list_tree(root) == {f"{root}/x": True, f"{root}/x/a.txt": False}
    assert fs.isdir(f"{url}/x") and fs.kind_of(f"{url}/x/a.txt") is False and fs.kind_of(f"{url}/y") is None


# --- end-to-end (slow) ---------------------------------------------------------------------------------------

def _remote_chain(workflow, result_url: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    wf = workflow("remote_chain.py")
    return wf.run("--result-dir", result_url, *args, timeout=timeout, env=_env())


@pytest.mark.slow
def test_workflow_with_remote_results_runs_locally(result_url: str, workflow) -> None:
    done = _remote_chain(workflow, result_url, "--n", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    fs = _fs(result_url)
    with remote.RemoteTarget(f"{result_url}/n=4/sum.txt", fs).open("r") as f:
        assert f.read() == "60"
    dry = _remote_chain(workflow, result_url, "--n", "4", "--dry-run")
    assert dry.returncode == 0 and "All tasks are finished!" in dry.stdout, dry.stdout + dry.stderr
    shown = _remote_chain(workflow, result_url, "--n", "4", "--show-output")
    assert f"[exists ] {result_url}/i=3/number.txt" in shown.stdout, shown.stdout
    paths = subprocess.run([sys.executable, "-m", "b2batch", "show", "--paths", "remote_chain.py", "--result-dir",
                            result_url, "--n", "4"], cwd=workflow("remote_chain.py").folder, env=_env(),
                           capture_output=True, text=True, timeout=120, check=False)
    assert f"{result_url}/n=4/sum.txt" in paths.stdout.split(), paths.stdout + paths.stderr
    removed = _remote_chain(workflow, result_url, "--n", "4", "--remove-only", "--yes")
    assert removed.returncode == 0 and "Removed outputs for 1 tasks" in removed.stdout, removed.stdout
    assert not fs.exists(f"{result_url}/n=4/sum.txt") and fs.exists(f"{result_url}/i=0/number.txt")
    dry = _remote_chain(workflow, result_url, "--n", "4", "--dry-run")
    assert dry.returncode == 1 and "In total 1" in dry.stdout, dry.stdout


@pytest.fixture
def slurm() -> None:
    if os.geteuid() != 0 or subprocess.run(["bash", str(SLURM_SCRIPT), "status"], capture_output=True,
                                           timeout=120, check=False).returncode != 0:
        pytest.skip("the local Slurm is not running (bash tests/clusters/slurm.sh start)")


@pytest.mark.slow
@pytest.mark.slurm
def test_workflow_with_remote_results_runs_on_slurm(slurm: None, result_url: str, workflow) -> None:
    done = _remote_chain(workflow, result_url, "--n", "3", "--batch", "--batch-system", "slurm", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with remote.RemoteTarget(f"{result_url}/n=3/sum.txt", _fs(result_url)).open("r") as f:
        assert f.read() == "30"
    assert "slurm" in done.stderr.lower()


@pytest.mark.slow
def test_job_killed_while_writing_leaves_nothing_complete(result_url: str, workflow, tmp_path: Path) -> None:
    wf = workflow("remote_chain.py")
    marker = tmp_path / "writing"
    steering = subprocess.Popen(wf.command("--result-dir", result_url, "--n", "3", "--hang-at", "1",
                                           "--marker", str(marker)),
                                cwd=wf.folder, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(marker.exists, timeout=120, what="Gen(i=1) to be writing")
    finally:
        os.killpg(steering.pid, signal.SIGKILL)
        steering.wait(timeout=30)
    fs = _fs(result_url)
    assert not fs.exists(f"{result_url}/i=1/number.txt")
    dry = wf.run("--result-dir", result_url, "--n", "3", "--dry-run", env=_env())
    assert "Would run Gen(i=1)" in dry.stdout and "Would run Sum(n=3)" in dry.stdout, dry.stdout
    rerun = wf.run("--result-dir", result_url, "--n", "3", env=_env(), timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    with remote.RemoteTarget(f"{result_url}/i=1/number.txt", fs).open("r") as f:
        assert f.read() == "partial 10"
    with remote.RemoteTarget(f"{result_url}/n=3/sum.txt", fs).open("r") as f:
        assert f.read() == "30"
    leftovers = [p for p in fs.list_tree(remote.urls.parse(result_url).path) if p.endswith(".tmp")]
    assert leftovers == []


@pytest.fixture(params=["xrootd", "webdav"])
def stoppable_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, object, object]]:
    """A server of its own for this test: (its URL, stop, start)."""
    if request.param == "webdav":
        pytest.importorskip("webdav4")
        pytest.importorskip("wsgidav")
        server = WebDAVServer(tmp_path / "dav")
        server.root.mkdir()
        server.start()
        yield f"{server.url}/outage", server.stop, server.start
        server.stop()
        return
    request.getfixturevalue("xrootd_server")  # skips without root or the installed server
    port = _free_port()  # the server's own user cannot enter pytest's private tmp_path: a folder of its own
    env = {"B2BATCH_XROOTD_DIR": f"/var/lib/b2batch-xrootd-test-{port}", "B2BATCH_XROOTD_PORT": str(port)}

    def run(command: str) -> None:
        done = _xrootd(command, **env)
        assert done.returncode == 0, done.stderr

    run("start")
    yield f"root://localhost:{port}//outage", lambda: run("stop"), lambda: run("start")
    run("stop")
    shutil.rmtree(env["B2BATCH_XROOTD_DIR"], ignore_errors=True)


@pytest.mark.slow
def test_server_outage_is_retried_then_reported(stoppable_server, workflow) -> None:
    url, stop, start = stoppable_server
    wf = workflow("remote_chain.py")
    stop()
    steering = subprocess.Popen(wf.command("--result-dir", url, "--n", "2", "--retries", "8"), cwd=wf.folder,
                                env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # the workflow meets the stopped server and retries
    start()
    stdout, stderr = steering.communicate(timeout=300)
    assert steering.returncode == 0, stderr[-3000:]
    assert f"of {url}/" in stderr and "retrying in" in stderr, stderr[-3000:]  # each retry logged with the URL
    stop()
    failed = wf.run("--result-dir", url, "--n", "2", "--retries", "2", "--dry-run", env=_env())
    assert failed.returncode == 1
    assert "failed 2 times" in failed.stderr and "runs and is reachable" in failed.stderr, failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    start()
