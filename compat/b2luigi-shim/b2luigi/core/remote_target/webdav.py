"""``b2luigi.core.remote_target.webdav``: ``WebDAVSystem`` and ``WebDAVTarget``, and b2luigi's
``ensure_requests_ca_bundle`` for code that talks to WebDAV servers through ``requests`` itself.

Where webdavclient3 (b2luigi 1.3's WebDAV client, ``webdav3.client.Client``) can be imported, ``WebDAVSystem``
works as b2luigi's does: through that client, each method one call of it, paths as given (relative to the
server path), the grid proxy (``X509_USER_PROXY``) as the client certificate and ``X509_CERT_DIR`` required.
Without it they are b2batch's (``b2batch.WebDAVSystem``: webdav4, retries, atomic uploads, batched checks).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from b2luigi.core.settings import _no_value, get_setting
from b2batch import RemoteTarget
from b2batch.remote import RemoteFileSystem

try:
    from webdav3.client import Client
except ImportError:  # b2batch's own WebDAV classes
    Client = None

__all__ = ["WebDAVSystem", "WebDAVTarget", "ensure_requests_ca_bundle"]


def _copy_into(source: Path, folder: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, folder, dirs_exist_ok=True)
    else:
        shutil.copy2(source, folder / source.name)


def ensure_requests_ca_bundle(extra: str) -> Path:
    """Make ``$REQUESTS_CA_BUNDLE`` take the CA certificates of ``extra`` (a file or a folder) too, and return
    what it names now: ``extra`` itself when the variable was unset or names ``extra`` already (then it is
    left as it was), else a new folder under ``scratch_dir`` with the certificates of both. Raises
    ``FileNotFoundError`` when ``extra`` does not exist."""
    wanted = Path(extra).expanduser().resolve()
    if not wanted.exists():
        raise FileNotFoundError(f"The CA certificates {wanted} do not exist.")
    current = os.environ.get("REQUESTS_CA_BUNDLE")
    if not current:
        os.environ["REQUESTS_CA_BUNDLE"] = str(wanted)
        return wanted
    current_path = Path(current).expanduser().resolve()
    if current_path == wanted:
        return wanted
    scratch = Path(get_setting("scratch_dir", default=tempfile.gettempdir())).expanduser()
    scratch.mkdir(parents=True, exist_ok=True)
    merged = Path(tempfile.mkdtemp(prefix="requests-ca-", dir=scratch)).resolve()
    for source in (current_path, wanted):
        if source.exists():
            _copy_into(source, merged)
    os.environ["REQUESTS_CA_BUNDLE"] = str(merged)
    return merged


def _required(name: str) -> str:
    value = get_setting(name, os.environ.get(name, _no_value))
    if value is _no_value:
        raise ValueError(f"{name} is not set in environment variables or settings.")
    return value


class _WebDAVClient3System(RemoteFileSystem):
    """b2luigi's ``WebDAVSystem(server_path)`` (``https://host/``) through webdavclient3."""

    kind = "WebDAV"

    def __init__(self, server_path: str) -> None:
        super().__init__(server_path)
        self.client = Client({"webdav_hostname": self.server_path})
        self.client.session.cert = _required("X509_USER_PROXY")
        ensure_requests_ca_bundle(_required("X509_CERT_DIR"))

    def exists(self, path: str) -> bool:
        return self.client.check(path)

    def locate(self, path: str) -> bool:
        return self.client.check(path)

    def copy_file_to_remote(self, local_path: str, remote_path: str, force: bool = False) -> None:
        """Upload ``local_path``; with ``force`` what is at ``remote_path`` is removed first."""
        if force and self.client.check(remote_path):
            self.client.clean(remote_path=remote_path)
        self.client.upload_sync(remote_path=remote_path, local_path=local_path)

    def copy_file_from_remote(self, remote_path: str, local_path: str, force: bool = False) -> None:
        """Download to ``local_path``; with ``force`` a file there is removed first."""
        if force and Path(local_path).exists():
            Path(local_path).unlink()
        self.client.download_sync(remote_path=remote_path, local_path=local_path)

    def copy_dir_from_remote(self, remote_path: str, local_path: str, force: bool = False) -> None:
        self.copy_file_from_remote(remote_path, local_path, force=force)

    def move(self, source_path: str, dest_path: str) -> None:  # type: ignore[override]
        self.client.move(remote_path_from=source_path, remote_path_to=dest_path)

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        if raise_if_exists and self.exists(path=path):
            raise FileExistsError(f"Directory with the name {path} already exists on the remote server.")
        self.client.mkdir(remote_path=path, recursive=parents)

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        self.client.clean(remote_path=path)

    def remove_dir(self, path: str) -> None:
        self.remove(path=path)

    def listdir(self, path: str, print_entries: bool = False) -> list[str]:
        return self.client.list(path)


class _WebDAVClient3Target(RemoteTarget):
    """b2luigi's ``WebDAVTarget(path, file_system)``: a RemoteTarget on the file system, its path as given."""


if Client is not None:
    WebDAVSystem: type = _WebDAVClient3System
    WebDAVTarget: type = _WebDAVClient3Target
    WebDAVSystem.__name__ = WebDAVSystem.__qualname__ = "WebDAVSystem"
    WebDAVTarget.__name__ = WebDAVTarget.__qualname__ = "WebDAVTarget"
else:
    from b2batch import WebDAVSystem, WebDAVTarget  # noqa: F401
