"""Folder outputs under a remote result_dir, against the real XRootD server (tests/clusters/xrootd.sh) and a
wsgidav server: uploaded atomically (a temporary name, then a rename), seen as complete by single and
batched checks, read back as inputs, removed; the slow test runs tests/workflows/remote_folders.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import b2batch
from b2batch import remote
from b2batch.remote import bulk_checks, existence
from b2batch.remote.backoff import RemoteError
from test_remote import _env, _fs, result_url, webdav_server, xrootd_server  # noqa: F401 (fixtures)


class FolderOut(b2batch.Task):
    i = b2batch.IntParameter()
    fail = b2batch.BoolParameter(default=False, hidden=True)  # not in the output path

    def output(self):
        yield self.add_to_output("plots")

    @b2batch.on_temporary_files
    def run(self):
        folder = Path(self.get_output_file_name("plots"))
        (folder / "sub" / "empty").mkdir(parents=True)
        (folder / "a.txt").write_text(f"a{self.i}")
        (folder / "sub" / "b.txt").write_text(f"b{self.i}")
        if self.fail:
            raise RuntimeError("failed half-way")


def _root(url: str) -> str:
    return remote.urls.parse(url).path


def _complete_every_way(task: FolderOut, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether ``task`` is complete: asked alone, in bulk checks by one stat, and in bulk checks by a listing."""
    answers = [task.complete()]
    with bulk_checks():
        answers.append(task.complete())
    with monkeypatch.context() as m:
        m.setattr(existence, "SINGLE_CHECKS", 0)
        with bulk_checks():
            answers.append(task.complete())
    return answers


def test_folder_output_is_uploaded_atomically(result_url: str, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                              tmp_path: Path) -> None:
    b2batch.set_setting("result_dir", result_url)
    fs, root = _fs(result_url), _root(result_url)
    moves: list[tuple[str, str]] = []
    original_move = type(fs)._move

    def recording_move(self: remote.RemoteFileSystem, source: str, destination: str) -> None:
        assert self.kind_of(destination) is None, "the final folder existed before the rename"
        moves.append((source, destination))
        original_move(self, source, destination)

    monkeypatch.setattr(type(fs), "_move", recording_move)
    task = FolderOut(i=1)
    assert _complete_every_way(task, monkeypatch) == [False] * 3
    task.run()
    assert len(moves) == 1 and moves[0][1] == f"{root}/i=1/plots", moves
    assert re.fullmatch(rf"{re.escape(root)}/i=1/\.plots\.[0-9a-f]+\.tmp", moves[0][0]), moves
    assert fs.list_tree(root) == {f"{root}/i=1": True, f"{root}/i=1/plots": True, f"{root}/i=1/plots/a.txt": False,
                                  f"{root}/i=1/plots/sub": True, f"{root}/i=1/plots/sub/b.txt": False,
                                  f"{root}/i=1/plots/sub/empty": True}
    assert _complete_every_way(task, monkeypatch) == [True] * 3

    target = next(task.output())["plots"]
    with target.get_temporary_input() as local:
        assert Path(local, "a.txt").read_text() == "a1" and Path(local, "sub", "b.txt").read_text() == "b1"
        assert Path(local, "sub", "empty").is_dir()
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "new.txt").write_text("new")
    fs.put_atomically(str(tmp_path / "again"), target.path)  # a rerun replaces the folder as a whole
    assert sorted(fs.list_tree(f"{root}/i=1")) == [f"{root}/i=1/plots", f"{root}/i=1/plots/new.txt"]

    task.remove_output()
    assert fs.list_tree(f"{root}/i=1") == {}
    assert _complete_every_way(task, monkeypatch) == [False] * 3


def test_failed_or_killed_folder_upload_counts_as_incomplete(result_url: str,  # noqa: F811
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    b2batch.set_setting("result_dir", result_url)
    b2batch.set_setting("remote_retries", 1)
    scratch = tmp_path / "scratch"
    b2batch.set_setting("scratch_dir", str(scratch))
    fs, root = _fs(result_url), _root(result_url)
    with pytest.raises(RuntimeError, match="half-way"):
        FolderOut(i=2, fail=True).run()  # run() failed: nothing is uploaded
    assert fs.kind_of(f"{root}/i=2") is None

    uploads = []
    original_upload = type(fs)._upload

    def failing_upload(self: remote.RemoteFileSystem, local: str, path: str) -> None:
        uploads.append(path)
        if len(uploads) == 2:
            raise RemoteError(f"upload to {path}: disk full")
        original_upload(self, local, path)

    monkeypatch.setattr(type(fs), "_upload", failing_upload)
    with pytest.raises(RemoteError, match="disk full"):
        FolderOut(i=3).run()  # the upload failed half-way: the temporary folder is removed
    monkeypatch.undo()
    b2batch.set_setting("result_dir", result_url)
    assert list(scratch.iterdir()) == [], "the local copy of a failed upload was left behind"
    assert len(uploads) == 2 and all("/.plots." in path for path in uploads), uploads
    assert fs.list_tree(f"{root}/i=3") == {}

    local = tmp_path / "plots"
    (local / "sub").mkdir(parents=True)
    (local / "a.txt").write_text("a")
    fs.mkdir(f"{root}/i=4")
    fs._upload_tree(str(local), f"{root}/i=4/.plots.0badc0de.tmp")  # as a job killed while uploading leaves it
    assert _complete_every_way(FolderOut(i=4), monkeypatch) == [False] * 3


@pytest.mark.slow
def test_workflow_with_folder_outputs(result_url: str, workflow) -> None:  # noqa: F811
    wf = workflow("remote_folders.py")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return wf.run("--result-dir", result_url, *args, timeout=300, env=_env())

    done = run("--n", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    with remote.RemoteTarget(f"{result_url}/n=2/index.txt", _fs(result_url)).open("r") as f:
        assert f.read().split() == ["a.txt", "b.txt", "extra/c.txt"] * 2
    dry = run("--n", "2", "--dry-run")
    assert dry.returncode == 0 and "All tasks are finished!" in dry.stdout, dry.stdout + dry.stderr
    shown = run("--n", "2", "--show-output")
    assert f"[exists ] {result_url}/i=1/plots\n" in shown.stdout, shown.stdout
    paths = subprocess.run([sys.executable, "-m", "b2batch", "show", "--paths", "remote_folders.py", "--result-dir",
                            result_url, "--n", "2"], cwd=wf.folder, env=_env(), capture_output=True, text=True,
                           timeout=120, check=False)
    assert f"{result_url}/i=0/plots" in paths.stdout.split(), paths.stdout + paths.stderr
    removed = run("--top-plots", "0", "--remove-only", "--yes")
    assert removed.returncode == 0 and "Removed outputs for 1 tasks" in removed.stdout, removed.stdout
    fs = _fs(result_url)
    assert fs.kind_of(f"{result_url}/i=0/plots") is None and fs.isdir(f"{result_url}/i=1/plots")
    dry = run("--top-plots", "0", "--dry-run")
    assert dry.returncode == 1 and "Would run Plots(i=0)" in dry.stdout and "In total 1" in dry.stdout, dry.stdout
    rerun = run("--top-plots", "0")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    leftovers = [p for p in fs.list_tree(_root(result_url)) if p.endswith(".tmp")]
    assert leftovers == [] and fs.isdir(f"{result_url}/i=0/plots/extra")
