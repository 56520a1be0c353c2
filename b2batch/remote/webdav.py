"""WebDAV file system and target (b2luigi's ``WebDAVSystem``/``WebDAVTarget``), through ``webdav4``
(``pip install 'b2batch[webdav]'``).

``davs://host/path`` is WebDAV over HTTPS, ``dav://`` over plain HTTP (``https://``/``http://`` work too). A
grid proxy is used as the client certificate when the setting or environment variable ``X509_USER_PROXY``
names one, and ``X509_CERT_DIR`` as the CA folder. Connection errors, timeouts and HTTP 5xx answers are
transient and retried; other HTTP errors are final. Existence checks and listings are ``PROPFIND`` requests
asking for the resource type only (depth 0 for one file; depth infinity for a folder's tree, one level at a
time when the server refuses that), parsed here: webdav4's ``info()``/``ls()`` ask for every property and
parse each answer into dictionaries, several times slower for thousands of entries.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

from b2batch.remote import davquery
from b2batch.remote.base import RemoteFileSystem, RemoteTarget
from b2batch.remote.backoff import RemoteError, RetryPolicy, TransientRemoteError

_HTTP_SCHEME = {"davs": "https", "https": "https", "dav": "http", "http": "http"}
_MISSING_EXTRA = ("WebDAV outputs (davs:// URLs, WebDAVSystem) need the webdav4 package, which is not installed: "
                  "install b2batch's extra with  pip install 'b2batch[webdav]'  (or  pip install webdav4).")


def _installed() -> bool:
    """Whether webdav4 and httpx can be imported (without importing them: that takes 0.3 s)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("httpx", "webdav4.client"))
    except (ImportError, ValueError):
        return False


def _modules() -> tuple[Any, Any]:
    try:
        import httpx
        import webdav4.client
    except ImportError as error:
        raise RemoteError(_MISSING_EXTRA) from error
    return httpx, webdav4.client


def _credential(name: str) -> str | None:
    from b2batch.settings import get_setting

    return get_setting(name, default=None) or os.environ.get(name) or None


class WebDAVSystem(RemoteFileSystem):
    """A WebDAV server: ``WebDAVSystem("davs://host:2880")``. ``auth`` is passed to httpx (e.g. a
    ``(user, password)`` pair); ``timeout`` (s) bounds each request."""

    kind = "WebDAV"

    def __init__(self, server_path: str, *, retry: RetryPolicy | None = None, auth: Any = None,
                 timeout: float = 60.0) -> None:
        super().__init__(server_path, retry=retry)
        if not _installed():
            raise RemoteError(_MISSING_EXTRA)
        scheme = _HTTP_SCHEME[self._server.scheme]
        proxy, ca_dir = _credential("X509_USER_PROXY"), _credential("X509_CERT_DIR")
        options: dict[str, Any] = {"timeout": timeout}
        context = None
        if scheme == "http":  # no TLS: skip loading the CA bundle (0.1 s)
            options["verify"] = False
        elif proxy or ca_dir:
            import ssl

            context = ssl.create_default_context(capath=ca_dir) if ca_dir else ssl.create_default_context()
            if proxy:
                context.load_cert_chain(proxy)
            options["verify"] = context
        self._client_options = dict(base_url=f"{scheme}://{self._server.netloc}", auth=auth, retry=False, **options)
        self._client: tuple[int, Any] | None = None
        #: Existence checks and listings over http.client (None: through httpx, see davquery).
        self._queries = (davquery.Queries(scheme, self._server.netloc, timeout=timeout, context=context, auth=auth)
                         if davquery.usable(scheme, self._server.netloc, auth) else None)

    @property
    def _errors(self) -> Any:
        """webdav4's client module (its error classes)."""
        return _modules()[1]

    @property
    def _httpx(self) -> Any:
        return _modules()[0]

    @property
    def client(self) -> Any:
        """The webdav4 client of this process (a forked worker must not share its parent's connections)."""
        if self._client is None or self._client[0] != os.getpid():
            self._client = (os.getpid(), _modules()[1].Client(**self._client_options))
        return self._client[1]

    def _attempt(self, operation: str, path: str, call: Any, missing: Any = RemoteError) -> Any:
        """``call()``; a missing path gives ``missing`` (or raises it), transient errors raise TransientRemoteError."""
        errors = self._errors
        try:
            return call()
        except errors.BadGatewayError as error:
            raise TransientRemoteError(f"{operation} {self.url(path)}: 502 Bad Gateway") from error
        except errors.ResourceNotFound:
            if missing is RemoteError:
                raise RemoteError(f"{operation} {self.url(path)}: no such file or folder") from None
            return missing
        except errors.HTTPError as error:
            message = f"{operation} {self.url(path)}: {error}"
            if error.status_code >= 500:
                raise TransientRemoteError(message) from error
            if error.status_code == 404:
                if missing is RemoteError:
                    raise RemoteError(f"{operation} {self.url(path)}: no such file or folder") from None
                return missing
            raise RemoteError(f"The WebDAV server refused to {message}.") from error
        except self._httpx.TransportError as error:
            raise TransientRemoteError(f"{operation} {self.url(path)}: {type(error).__name__}: {error}") from error
        except errors.ClientError as error:
            raise RemoteError(f"The WebDAV server refused to {operation} {self.url(path)}: {error}") from error

    def _stat(self, path: str) -> bool | None:
        found = self._propfind(path, "0")  # one entry: ``path`` (as the server spells it)
        return None if found is None else any(found.values())

    def _stat_many(self, paths: list[str]) -> dict[str, bool | None]:
        with ThreadPoolExecutor(max_workers=16) as pool:
            return dict(zip(paths, pool.map(self._stat, paths)))

    def _propfind(self, path: str, depth: str) -> dict[str, bool] | None:
        """``{path: is_folder}`` of ``path`` and what lies below it to ``depth``, from one PROPFIND asking only
        for the resource type (servers answer that much faster than all properties); None if ``path`` does
        not exist."""
        operation = "stat" if depth == "0" else "list"
        answer = self._query(operation, path, depth) if self._queries is not None else \
            self._attempt(operation, path, lambda: self._ask(path, depth), missing=None)
        if answer is None:
            return None
        found = {}
        for response in ElementTree.fromstring(answer).iter("{DAV:}response"):
            href = response.findtext("{DAV:}href", "")
            if not href.startswith("/"):  # a full URL
                href = urlsplit(href).path
            found[(unquote(href) if "%" in href else href).rstrip("/") or "/"] = \
                response.find("{DAV:}propstat/{DAV:}prop/{DAV:}resourcetype/{DAV:}collection") is not None
        return found

    def _query(self, operation: str, path: str, depth: str) -> bytes | None:
        """The body of a PROPFIND answer over http.client; None if ``path`` does not exist."""
        assert self._queries is not None
        try:
            status, body, location = self._queries.propfind(path, depth)
        except (OSError, http.client.HTTPException) as error:
            raise TransientRemoteError(f"{operation} {self.url(path)}: {type(error).__name__}: {error}") from error
        if status == 404:
            return None
        if status >= 500:
            raise TransientRemoteError(f"{operation} {self.url(path)}: HTTP {status}")
        if status >= 300:
            moved = f" (redirected to {location})" if location else ""
            raise RemoteError(f"The WebDAV server refused to {operation} {self.url(path)}: HTTP {status}{moved}.")
        return body

    def _ask(self, path: str, depth: str) -> bytes | None:
        """The body of a PROPFIND answer through httpx (webdav4's own request() would parse it once more)."""
        response = self.client.http.request("PROPFIND", self.client.join_url(path),
                                            content=davquery.RESOURCE_TYPE_ONLY, headers={"Depth": depth})
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise self._errors.HTTPError(response)
        return response.content

    def _list_below(self, path: str, depth: str) -> dict[str, bool] | None:
        found = self._propfind(path, depth)
        if found is not None:
            found.pop(path.rstrip("/") or "/", None)
        return found

    def _list(self, path: str, recursive: bool) -> dict[str, bool] | None:
        if not recursive:
            return self._list_below(path, "1")
        try:
            return self._list_below(path, "infinity")
        except RemoteError:  # a server that refuses depth infinity: one level at a time
            found = self._list_below(path, "1")
            if found is None:
                return None
            folders = [entry for entry, is_folder in found.items() if is_folder]
            while folders:
                below = self._list_below(folders.pop(), "1") or {}
                found.update(below)
                folders += [entry for entry, is_folder in below.items() if is_folder]
            return found

    def _upload(self, local_path: str, path: str) -> None:
        self._attempt("upload to", path, lambda: self.client.upload_file(local_path, path, overwrite=True))

    def _download(self, path: str, local_path: str) -> None:
        self._attempt("download", path, lambda: self.client.download_file(path, local_path))

    def _move(self, source: str, destination: str) -> None:
        self._attempt(f"rename to {destination}:", source,
                      lambda: self.client.move(source, destination, overwrite=True))

    def _mkdir(self, path: str) -> None:
        parts = [p for p in path.split("/") if p]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            if self._stat(folder) is None:
                try:
                    self._attempt("make the folder", folder, lambda f=folder: self.client.mkdir(f))
                except RemoteError:  # already there (made meanwhile) is fine
                    if self._stat(folder) is None:  # not made by someone else meanwhile
                        raise

    def _mkdir_new(self, path: str) -> None:
        self._attempt("make the folder", path, lambda: self.client.mkdir(path))

    def _remove_file(self, path: str) -> None:
        self._attempt("remove", path, lambda: self.client.remove(path), missing=None)

    def _remove_empty_dir(self, path: str) -> None:
        self._remove_file(path)


class WebDAVTarget(RemoteTarget):
    """A file on a WebDAV server: ``WebDAVTarget(path, file_system)``, as in b2luigi."""
