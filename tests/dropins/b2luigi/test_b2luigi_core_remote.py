"""b2luigi's remote targets through the shim: a ``RemoteTarget`` on a file system written for b2luigi keeps its
path as given and calls the file system's public methods as b2luigi does (b2batch.remote.plain); with
webdavclient3 installed ``b2luigi.WebDAVSystem`` works through ``webdav3.client.Client`` as b2luigi's does,
without it it is b2batch's. The differential script ``remote_target_own_fs.py`` compares the first with the
real b2luigi 1.3.0."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import types
from pathlib import Path
from unittest import mock

import pytest

from b2batch import remote


class _FolderSystem(remote.RemoteFileSystem):
    """A file system written as for b2luigi: the public methods only, over a local folder."""

    def __init__(self, root: Path) -> None:
        super().__init__("myserver")  # b2luigi's file systems may name the server as they like
        self.root, self.calls = root, []

    def exists(self, path: str) -> bool:
        self.calls.append(("exists", path))
        return (self.root / path).exists()

    def copy_file_to_remote(self, local_path: str, remote_path: str, force: bool = False) -> None:
        self.calls.append(("to_remote", remote_path, force))
        shutil.copy(local_path, self.root / remote_path)

    def copy_file_from_remote(self, remote_path: str, local_path: str, force: bool = False) -> None:
        self.calls.append(("from_remote", remote_path, os.path.basename(local_path)))
        shutil.copy(self.root / remote_path, local_path)

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        self.calls.append(("mkdir", path))
        (self.root / path).mkdir(parents=True, exist_ok=True)


def test_target_on_a_b2luigi_style_file_system_uses_its_public_methods(tmp_path: Path) -> None:
    fs = _FolderSystem(tmp_path / "server")
    target = remote.RemoteTarget("store/sub/a.txt", fs)
    assert (target.path, target.base_name, target.on_foreign_system) == ("store/sub/a.txt", "a.txt", True)
    target.makedirs()
    assert not target.exists()
    with target.temporary_path() as local:
        assert Path(local).name.startswith("a-luigi-tmp-")
        Path(local).write_text("data")
    assert (tmp_path / "server" / "store" / "sub" / "a.txt").read_text() == "data"
    (tmp_path / "down").mkdir()
    assert target.get(str(tmp_path / "down")) == str(tmp_path / "down" / "a.txt")
    with target.get_temporary_input() as copy:
        assert Path(copy).read_text() == "data" and Path(copy).name == "a.txt"
    assert not os.path.exists(copy)
    with pytest.raises(NotImplementedError, match="RemoteTarget does not support open yet."):
        target.open("r")
    assert fs.calls[:4] == [("mkdir", "store/sub"), ("exists", "store/sub/a.txt"), ("mkdir", "store/sub"),
                            ("to_remote", "store/sub/a.txt", True)]
    (tmp_path / "local.txt").write_text("moved")
    fs.rename_dont_move(str(tmp_path / "local.txt"), "elsewhere.txt")  # b2luigi: copy_file_to_remote(force=True)
    assert fs.calls[-1] == ("to_remote", "elsewhere.txt", True)


def test_on_temporary_files_uploads_an_output_through_its_own_target(b2luigi, tmp_path: Path) -> None:
    fs = _FolderSystem(tmp_path / "server")

    class Upload(b2luigi.Task):
        fail = b2luigi.BoolParameter(default=False)

        def output(self):
            yield {"data.txt": remote.RemoteTarget("store/data.txt", fs)}

        @b2luigi.on_temporary_files
        def run(self):
            with open(self.get_output_file_name("data.txt"), "w") as f:
                f.write("uploaded")
            if self.fail:
                raise ValueError("after writing")

    with pytest.raises(ValueError):
        Upload(fail=True).run()
    assert not (tmp_path / "server" / "store" / "data.txt").exists()
    Upload().run()
    assert (tmp_path / "server" / "store" / "data.txt").read_text() == "uploaded"
    assert ("to_remote", "store/data.txt", True) in fs.calls


def test_b2batch_file_systems_keep_urls(tmp_path: Path) -> None:
    class Native(remote.RemoteFileSystem):
        def _stat(self, path: str) -> bool | None:
            return None

    target = remote.RemoteTarget("/store/a.root", Native("root://host:1094"))
    assert target.path == "root://host:1094//store/a.root" and not target.on_foreign_system
    with pytest.raises(ValueError):
        Native("not a url")


class _Client:
    """Stands in for webdavclient3's ``webdav3.client.Client``: records calls."""

    instances: list[_Client] = []

    def __init__(self, options: dict) -> None:
        self.options, self.session, self.calls = options, types.SimpleNamespace(cert=None), []
        _Client.instances.append(self)

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs)) or (name == "check")


@pytest.fixture
def webdav_module(monkeypatch: pytest.MonkeyPatch, b2luigi):  # b2luigi: torn down after this fixture
    """``b2luigi.core.remote_target.webdav`` imported again with a stand-in webdavclient3 installed; imported
    once more without it after the test."""
    package = types.ModuleType("webdav3")
    client = types.ModuleType("webdav3.client")
    client.Client = _Client
    package.client = client
    monkeypatch.setitem(sys.modules, "webdav3", package)
    monkeypatch.setitem(sys.modules, "webdav3.client", client)
    from b2luigi.core.remote_target import webdav

    yield importlib.reload(webdav)
    monkeypatch.undo()
    importlib.reload(webdav)


def test_webdav_system_works_through_webdavclient3_when_installed(webdav_module, b2luigi, monkeypatch,
                                                                  tmp_path: Path) -> None:
    assert b2luigi.WebDAVSystem is webdav_module.WebDAVSystem
    monkeypatch.delenv("X509_USER_PROXY", raising=False)
    monkeypatch.delenv("X509_CERT_DIR", raising=False)
    with pytest.raises(ValueError, match="X509_USER_PROXY is not set in environment variables or settings."):
        webdav_module.WebDAVSystem("https://host/")
    monkeypatch.setenv("X509_USER_PROXY", "/tmp/proxy")
    with pytest.raises(ValueError, match="X509_CERT_DIR is not set"):
        webdav_module.WebDAVSystem("https://host/")
    monkeypatch.setenv("X509_CERT_DIR", str(tmp_path))
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    fs = webdav_module.WebDAVSystem("https://host/")
    assert (fs.client.options, fs.client.session.cert) == ({"webdav_hostname": "https://host/"}, "/tmp/proxy")
    assert os.environ["REQUESTS_CA_BUNDLE"] == str(tmp_path)
    assert fs.exists("a/b") is True
    fs.copy_file_to_remote("local.txt", "remote.txt", force=True)
    fs.mkdir("new/dir")
    fs.remove_dir("old")
    assert [call[0] for call in fs.client.calls] == ["check", "check", "clean", "upload_sync", "mkdir", "clean"]
    assert fs.client.calls[3][2] == {"remote_path": "remote.txt", "local_path": "local.txt"}
    target = webdav_module.WebDAVTarget("dir/file.txt", fs)
    assert target.path == "dir/file.txt" and type(target).__name__ == "WebDAVTarget"


def test_webdav_system_is_b2batchs_without_webdavclient3(b2luigi, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "webdav3", None)  # not importable
    monkeypatch.setitem(sys.modules, "webdav3.client", None)
    from b2luigi.core.remote_target import webdav

    try:
        module = importlib.reload(webdav)
        from b2batch.remote.webdav import WebDAVSystem

        assert module.WebDAVSystem is WebDAVSystem and b2luigi.WebDAVSystem is WebDAVSystem
    finally:
        monkeypatch.undo()
        importlib.reload(webdav)


def test_xrootd_client_can_be_replaced() -> None:
    pytest.importorskip("XRootD")
    from b2batch.remote.xrootd import XRootDSystem

    fs = XRootDSystem("root://host")
    fs.client = mock.MagicMock()
    fs.client.stat.return_value = (mock.MagicMock(ok=True), None)
    assert fs.exists("/a/b")
    fs.client.stat.assert_called_once()
