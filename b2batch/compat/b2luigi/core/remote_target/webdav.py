"""``b2luigi.core.remote_target.webdav``: ``WebDAVSystem`` and ``WebDAVTarget``, b2batch's (through webdav4,
with the grid proxy and CA folder given to its TLS context), and b2luigi's ``ensure_requests_ca_bundle``
for code that talks to WebDAV servers through ``requests`` itself."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from b2batch.settings import get_setting
from b2batch.remote.webdav import WebDAVSystem, WebDAVTarget

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
    scratch = Path(get_setting("scratch_dir") or tempfile.gettempdir()).expanduser()
    scratch.mkdir(parents=True, exist_ok=True)
    merged = Path(tempfile.mkdtemp(prefix="requests-ca-", dir=scratch)).resolve()
    for source in (current_path, wanted):
        if source.exists():
            _copy_into(source, merged)
    os.environ["REQUESTS_CA_BUNDLE"] = str(merged)
    return merged
