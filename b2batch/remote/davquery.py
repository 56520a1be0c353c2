"""Read-only WebDAV queries (``PROPFIND``) over the standard library's ``http.client``, for existence checks
and listings; everything else (uploads, downloads, renames, folders, removal) goes through webdav4.

Why: a workflow's ``--dry-run`` against a WebDAV result_dir makes a few queries and nothing else, and
importing webdav4's stack for them (httpx, httpcore, which imports trio and anyio when installed) took
0.3-0.5 s, as long as the whole dry run on local files. ``http.client`` is imported anyway (luigi uses it).

One keep-alive connection per thread and process; a connection the server closed while idle is reopened
once at once. Used when the connection is plain: no ``auth`` or a ``(user, password)`` pair (HTTP Basic),
and no proxy set in the environment for the server; otherwise the file system asks through httpx.
"""

from __future__ import annotations

import base64
import http.client
import os
import ssl
import threading
import urllib.request
from typing import Any
from urllib.parse import quote

#: The body of every query: only the resource type (servers answer that much faster than all properties).
RESOURCE_TYPE_ONLY = b'<?xml version="1.0"?><propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>'


def usable(scheme: str, host: str, auth: Any) -> bool:
    """Whether queries to ``host`` can go over http.client (no proxy for it, no auth or HTTP Basic)."""
    if auth is not None and not (isinstance(auth, tuple) and len(auth) == 2):
        return False
    proxies = urllib.request.getproxies()
    return scheme not in proxies or bool(urllib.request.proxy_bypass(host.rsplit(":", 1)[0]))


def _default_context() -> ssl.SSLContext:
    """The CAs httpx trusts by default, so that queries and transfers trust the same servers:
    ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set, else certifi's bundle."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


class Queries:
    """``PROPFIND`` requests to one server: ``propfind(path, depth)`` gives the status and the body."""

    def __init__(self, scheme: str, netloc: str, *, timeout: float, context: ssl.SSLContext | None = None,
                 auth: tuple[str, str] | None = None) -> None:
        self._scheme, self._netloc, self._timeout = scheme, netloc, timeout
        self._context = context
        self._headers = {"Content-Type": "application/xml", "Accept-Encoding": "identity"}
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._local = threading.local()

    def _connection(self, fresh: bool) -> http.client.HTTPConnection:
        held = getattr(self._local, "held", None)
        if held is not None and (fresh or held[0] != os.getpid()):
            held[1].close()
            held = None
        if held is None:
            if self._scheme == "https":
                if self._context is None:
                    self._context = _default_context()
                connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                    self._netloc, timeout=self._timeout, context=self._context)
            else:
                connection = http.client.HTTPConnection(self._netloc, timeout=self._timeout)
            held = self._local.held = (os.getpid(), connection)
        return held[1]

    def propfind(self, path: str, depth: str) -> tuple[int, bytes, str | None]:
        """The status, body and ``Location`` header of ``PROPFIND path`` with ``Depth: depth``. Network errors
        (``OSError``, ``http.client.HTTPException``) are raised as they are, after one fresh connection for a
        kept one the server had closed."""
        headers = {**self._headers, "Depth": depth}
        reused = getattr(self._local, "held", None) is not None
        for fresh in (False, True) if reused else (True,):
            connection = self._connection(fresh)
            try:
                connection.request("PROPFIND", quote(path), body=RESOURCE_TYPE_ONLY, headers=headers)
                response = connection.getresponse()
                return response.status, response.read(), response.getheader("Location")
            except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest,
                    http.client.BadStatusLine):
                connection.close()
                if fresh:
                    raise
            except BaseException:
                connection.close()
                raise
        raise AssertionError("unreachable")
