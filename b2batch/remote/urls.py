"""Remote URLs: which strings are remote, and how they split into a server and a path on it.

XRootD URLs keep the path after a double slash (``root://host:1094//store/user/a.root``); WebDAV URLs
(``davs://host/path``, ``dav://``, ``https://``, ``http://``) have one. A server's path as b2luigi's file
systems take it (``/store/user/a.root``) always begins with one slash.
"""

from __future__ import annotations

from typing import NamedTuple

XROOTD_SCHEMES = ("root", "xroot", "roots", "xroots")
WEBDAV_SCHEMES = ("davs", "dav", "https", "http")


class RemoteURL(NamedTuple):
    """``scheme://netloc`` is the server; ``path`` begins with ``/``."""

    scheme: str
    netloc: str
    path: str

    @property
    def server(self) -> str:
        return f"{self.scheme}://{self.netloc}"

    @property
    def kind(self) -> str:
        """``"xrootd"`` or ``"webdav"``."""
        return "xrootd" if self.scheme in XROOTD_SCHEMES else "webdav"

    def __str__(self) -> str:
        separator = "/" if self.kind == "xrootd" else ""
        return f"{self.server}{separator}{self.path}"


def is_remote(path: object) -> bool:
    """Whether ``path`` is a URL of a remote file system b2batch knows (a cheap test, asked per output)."""
    if not isinstance(path, str) or "://" not in path:
        return False
    return path.split("://", 1)[0].lower() in XROOTD_SCHEMES + WEBDAV_SCHEMES


def parse(url: str) -> RemoteURL:
    """Split ``url`` into scheme, host (with port) and path; a ValueError names what is wrong."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in XROOTD_SCHEMES + WEBDAV_SCHEMES:
        raise ValueError(f"{url!r} is not a remote URL: it must begin with one of "
                         f"{', '.join(s + '://' for s in XROOTD_SCHEMES + WEBDAV_SCHEMES)}.")
    netloc, slash, path = rest.partition("/")
    if not netloc:
        raise ValueError(f"{url!r} names no server: write e.g. root://host//path or davs://host/path.")
    path = "/" + path.lstrip("/") if slash else "/"
    return RemoteURL(scheme, netloc, _normalise(path))


def _normalise(path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"the remote path {path!r} contains '..'.")
    return "/" + "/".join(parts)


def server_of(server_path: str) -> RemoteURL:
    """The server of ``server_path`` (``root://host``, ``davs://host/``, ``https://host:8443``) as a RemoteURL
    with its path (a WebDAV server may have a base path, which then prefixes every path)."""
    return parse(server_path)


def join(url: str, *parts: str) -> str:
    """``url`` with ``parts`` appended (``join("root://h//a", "b=1", "c.txt")`` is ``root://h//a/b=1/c.txt``)."""
    parsed = parse(url)
    path = _normalise("/".join([parsed.path, *parts]))
    return str(parsed._replace(path=path))


def parent(url: str) -> str:
    parsed = parse(url)
    return str(parsed._replace(path=parsed.path.rsplit("/", 1)[0] or "/"))
