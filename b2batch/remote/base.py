"""The remote file system and target that the XRootD and WebDAV ones build on (b2luigi 1.3's names).

A file system does single attempts of each operation (``_stat``, ``_upload``, ...) in its subclass; this
base class retries them (:mod:`b2batch.remote.backoff`) and offers b2luigi's methods on top. Paths may be
given as paths on the server (``/store/a.root``) or as URLs of the same server (``root://host//store/a.root``).

Writes are atomic: a file, or a folder with everything in it, is uploaded under a temporary name beside its
final one (``.a.root.<random>.tmp``) and renamed when complete, so a killed upload never leaves a file or
folder that counts as an existing output.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import luigi.target

from b2batch.remote import existence, plain, urls
from b2batch.remote.backoff import RemoteError, RetryPolicy


class RemoteFileSystem(luigi.target.FileSystem):
    """A file system on a server ``server_path`` (``root://host:1094``, ``davs://host``)."""

    #: Said in errors after transient failures: how to make the server reachable.
    kind = "remote"

    def __init__(self, server_path: str, *, retry: RetryPolicy | None = None) -> None:
        self.server_path = server_path
        self.retry = retry or RetryPolicy()
        try:
            self._server = urls.server_of(server_path)
        except ValueError:
            if speaks_b2batch(self):
                raise
            self._server = None  # a subclass written for b2luigi may name its server as it likes

    # --- paths -------------------------------------------------------------------------------------------
    def path_of(self, path_or_url: str) -> str:
        """The path on the server of ``path_or_url`` (begins with ``/``)."""
        if urls.is_remote(path_or_url):
            parsed = urls.parse(path_or_url)
            if parsed.netloc != self._server.netloc:
                raise RemoteError(f"{path_or_url} is not on the server {self.server_path} of this file system; "
                                  f"use a file system of {parsed.server} for it.")
            return parsed.path
        return urls.parse(f"{self._server.server}/{os.fspath(path_or_url)}").path

    def url(self, path_or_url: str) -> str:
        """The full URL of ``path_or_url``."""
        return str(self._server._replace(path=self.path_of(path_or_url)))

    def _call(self, operation: str, path: str, attempt: Any) -> Any:
        fix = (f"Check that the {self.kind} server {self._server.server} runs and is reachable from this "
               f"host, or raise the setting 'remote_retries' (now {self.retry.attempts}) to wait longer.")
        return self.retry.call(operation, self.url(path), attempt, fix)

    # --- single attempts, one subclass per protocol -------------------------------------------------------
    def _stat(self, path: str) -> bool | None:
        """None if ``path`` does not exist, else whether it is a folder."""
        raise NotImplementedError

    def _stat_many(self, paths: list[str]) -> dict[str, bool | None]:
        return {path: self._stat(path) for path in paths}

    def _list(self, path: str, recursive: bool) -> dict[str, bool] | None:
        """``{path: is_folder}`` below the folder ``path`` (None if it does not exist)."""
        raise NotImplementedError

    def _upload(self, local_path: str, path: str) -> None:
        raise NotImplementedError

    def _download(self, path: str, local_path: str) -> None:
        raise NotImplementedError

    def _move(self, source: str, destination: str) -> None:
        raise NotImplementedError

    def _mkdir(self, path: str) -> None:
        """Make the folder ``path`` and its parents; no error if it exists."""
        raise NotImplementedError

    def _mkdir_new(self, path: str) -> None:
        """Make the folder ``path``, whose parent exists and which does not (one request where it can)."""
        self._mkdir(path)

    def _remove_file(self, path: str) -> None:
        raise NotImplementedError

    def _remove_empty_dir(self, path: str) -> None:
        raise NotImplementedError

    # --- b2luigi's and luigi's methods --------------------------------------------------------------------
    def kind_of(self, path: str) -> bool | None:
        """None if ``path`` does not exist, else whether it is a folder (asked now, with retries)."""
        path = self.path_of(path)
        return self._call("stat", path, lambda: self._stat(path))

    def exists(self, path: str) -> bool:
        session = existence.current()
        if session is not None:
            return session.exists(self, self.path_of(path))
        return self.kind_of(path) is not None

    def exists_many(self, paths: Iterable[str]) -> set[str]:
        """The paths of ``paths`` (as given) that exist, asked for all at once."""
        given = {self.path_of(p): p for p in paths}
        found = self._call("stat", next(iter(given), "/"), lambda: self._stat_many(list(given)))
        return {given[p] for p, kind in found.items() if kind is not None}

    def isdir(self, path: str) -> bool:
        return bool(self.kind_of(path))

    def locate(self, path: str) -> bool:
        return self.exists(path)

    def listdir(self, path: str, print_entries: bool = False) -> list[str]:
        """The URLs of the entries of the folder ``path`` (an error if it does not exist)."""
        path = self.path_of(path)
        found = self._call("list", path, lambda: self._list(path, recursive=False))
        if found is None:
            raise FileNotFoundError(f"{self.url(path)}: no such folder")
        if print_entries:
            for entry in sorted(found):
                print(self.url(entry))
        return [self.url(entry) for entry in sorted(found)]

    def list_tree(self, path: str, recursive: bool = True) -> dict[str, bool] | None:
        """``{path: is_folder}`` of everything below the folder ``path``; None if it does not exist."""
        path = self.path_of(path)
        return self._call("list", path, lambda: self._list(path, recursive))

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        path = self.path_of(path)
        if raise_if_exists and self.exists(path):
            raise luigi.target.FileAlreadyExists(self.url(path))
        self._call("mkdir", path, lambda: self._mkdir(path))

    def copy_file_to_remote(self, local_path: str, remote_path: str, force: bool = False) -> None:
        """Upload the file or folder ``local_path`` to ``remote_path`` atomically (under a temporary name, then
        renamed)."""
        path = self.path_of(remote_path)
        if not force and self.exists(path):
            raise luigi.target.FileAlreadyExists(f"{self.url(path)} exists; pass force=True to replace it")
        self.put_atomically(local_path, path)

    def put_atomically(self, local_path: str, remote_path: str) -> None:
        """Upload the file or folder ``local_path`` under a temporary name beside ``remote_path``, then rename
        it to ``remote_path`` (replacing what was there)."""
        local, path = os.fspath(local_path), self.path_of(remote_path)
        folder, name = path.rsplit("/", 1)
        temporary = f"{folder}/.{name}.{secrets.token_hex(4)}.tmp"
        self._call("mkdir", folder or "/", lambda: self._mkdir(folder or "/"))
        try:
            if os.path.isdir(local):
                self._upload_tree(local, temporary)
            else:
                self._call("upload", temporary, lambda: self._upload(local, temporary))
            if self.kind_of(path) is not None:
                self._remove_tree(path)
            self._call("rename", temporary, lambda: self._move(temporary, path))
        except BaseException:
            self._discard(temporary)
            raise

    def _upload_tree(self, local: str, path: str) -> None:
        """Upload every file and sub-folder of the local folder ``local`` into the new folder ``path``."""
        self._call("mkdir", path, lambda: self._mkdir_new(path))
        for folder, sub_folders, files in os.walk(local):
            relative = os.path.relpath(folder, local)
            remote = path if relative == "." else f"{path}/{relative.replace(os.sep, '/')}"
            for sub in sorted(sub_folders):
                self._call("mkdir", f"{remote}/{sub}", lambda p=f"{remote}/{sub}": self._mkdir_new(p))
            for file in sorted(files):
                target = f"{remote}/{file}"
                self._call("upload", target, lambda f=os.path.join(folder, file), t=target: self._upload(f, t))

    def _discard(self, temporary: str) -> None:
        """Remove a temporary upload, one try of each step (the upload failed: the server may be down)."""
        with contextlib.suppress(Exception):
            kind = self._stat(temporary)
            entries = (self._list(temporary, True) or {}) if kind else {}
            for entry in sorted(entries, key=len, reverse=True):  # files and sub-folders before their folders
                (self._remove_empty_dir if entries[entry] else self._remove_file)(entry)
            if kind is not None:
                (self._remove_empty_dir if kind else self._remove_file)(temporary)

    def rename_dont_move(self, path: str, dest: str) -> None:
        """luigi's atomic-write hook: ``path`` is a local file, uploaded to ``dest`` atomically (by a file
        system written for b2luigi: its ``copy_file_to_remote`` with ``force=True``, as b2luigi does)."""
        if not speaks_b2batch(self):
            self.copy_file_to_remote(path, dest, force=True)
            return
        self.put_atomically(path, dest)

    def copy_file_from_remote(self, remote_path: str, local_path: str, force: bool = False) -> None:
        path = self.path_of(remote_path)
        if os.path.exists(local_path) and not force:
            raise FileExistsError(f"{local_path} exists; pass force=True to replace it")
        Path(local_path).parent.mkdir(parents=True, exist_ok=True)
        self._call("download", path, lambda: self._download(path, os.fspath(local_path)))

    def copy_dir_from_remote(self, remote_path: str, local_path: str, force: bool = False) -> None:
        """Download every file below the folder ``remote_path`` into ``local_path``, keeping sub-folders."""
        root = self.path_of(remote_path)
        for entry, is_folder in sorted((self.list_tree(root) or {}).items()):
            local = os.path.join(local_path, entry[len(root):].lstrip("/"))
            if is_folder:
                os.makedirs(local, exist_ok=True)
            else:
                self.copy_file_from_remote(entry, local, force)

    def move(self, source_path: str, dest_path: str, raise_if_exists: bool = False) -> None:
        source, dest = self.path_of(source_path), self.path_of(dest_path)
        if raise_if_exists and self.exists(dest):
            raise luigi.target.FileAlreadyExists(self.url(dest))
        self._call("rename", source, lambda: self._move(source, dest))

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        path = self.path_of(path)
        kind = self._call("stat", path, lambda: self._stat(path))
        if kind is None:
            return
        if kind and not recursive:
            raise RemoteError(f"{self.url(path)} is a folder; pass recursive=True to remove it")
        self._remove_tree(path)

    def remove_dir(self, path: str) -> None:
        self._remove_tree(self.path_of(path))

    def _remove_tree(self, path: str) -> None:
        kind = self._call("stat", path, lambda: self._stat(path))
        if kind:
            entries = self._call("list", path, lambda: self._list(path, recursive=True)) or {}
            for entry in sorted(entries, key=len, reverse=True):  # files and sub-folders before their folders
                if entries[entry]:
                    self._call("rmdir", entry, lambda e=entry: self._remove_empty_dir(e))
                else:
                    self._call("remove", entry, lambda e=entry: self._remove_file(e))
            self._call("rmdir", path, lambda: self._remove_empty_dir(path))
        elif kind is not None:
            self._call("remove", path, lambda: self._remove_file(path))
        existence.forget(self, path)


def speaks_b2batch(file_system: Any) -> bool:
    """Whether ``file_system`` is a :class:`RemoteFileSystem` that implements b2batch's single attempts (the
    XRootD and WebDAV ones do); a subclass written for b2luigi implements the public methods only."""
    return isinstance(file_system, RemoteFileSystem) and type(file_system)._stat is not RemoteFileSystem._stat


class RemoteTarget(luigi.target.FileSystemTarget):
    """A file on a remote file system: ``RemoteTarget(path, file_system)`` as in b2luigi. ``path`` is the
    path on the server or a URL; the target's ``path`` is always the full URL (``root://host//a/b.root``)."""

    def __init__(self, path: str, file_system: RemoteFileSystem, root: str | None = None) -> None:
        self._file_system = file_system
        #: Whether ``file_system`` is one of b2batch's (its single attempts implemented); any other (a
        #: b2luigi-style subclass that implements the public methods, a mock) gets the path as given, and the
        #: target calls its public methods as b2luigi's RemoteTarget does (:mod:`b2batch.remote.plain`).
        self._native = speaks_b2batch(file_system)
        super().__init__(file_system.url(path) if self._native else os.fspath(path))
        #: The result folder the target lies in, if known: bulk checks list it at once.
        self.root = file_system.path_of(root) if root is not None and self._native else None

    @property
    def fs(self) -> RemoteFileSystem:
        return self._file_system

    @property
    def on_foreign_system(self) -> bool:
        """Whether the file system is not one of b2batch's (see ``__init__``): ``on_temporary_files`` then
        writes the output through the target's own :meth:`temporary_path`, as b2luigi does."""
        return not self._native

    @property
    def base_name(self) -> str:
        if not self._native:
            return plain.base_name(self)
        return self.path.rsplit("/", 1)[-1]

    def exists(self) -> bool:
        if not self._native:
            return self.fs.exists(self.path)
        session = existence.current()
        if session is not None:
            return session.exists(self.fs, self.fs.path_of(self.path), self.root)
        return self.fs.exists(self.path)

    def makedirs(self) -> None:
        if not self._native:
            return plain.makedirs(self)
        self.fs.mkdir(urls.parent(self.path))

    def get(self, path: str = "~") -> str:
        """Download the file (or the folder, with everything in it) into the local folder ``path``; the local
        file's (folder's) path."""
        if not self._native:
            return plain.get(self, path)
        local = str(Path(os.path.expanduser(path)) / self.base_name)
        if self.fs.isdir(self.path):
            Path(local).mkdir(parents=True, exist_ok=True)
            self.fs.copy_dir_from_remote(self.path, local, force=True)
        else:
            self.fs.copy_file_from_remote(self.path, local, force=True)
        return local

    def get_temporary_input(self, task: Any = None, **kwargs: Any) -> Any:
        """A local copy of the file (or folder), removed when the context ends."""
        if not self._native:
            return plain.get_temporary_input(self, _scratch(task), **kwargs)
        return self._downloaded(task)

    @contextlib.contextmanager
    def _downloaded(self, task: Any) -> Iterator[str]:
        with tempfile.TemporaryDirectory(prefix="b2batch-input-", dir=_scratch(task)) as folder:
            yield self.get(folder)

    def temporary_path(self, task: Any = None, **kwargs: Any) -> Any:
        """A local path to write the file (or make the folder) to; uploaded atomically when the context ends
        without error."""
        if not self._native:
            return plain.temporary_path(self, _scratch(task), **kwargs)
        return self._uploaded()

    @contextlib.contextmanager
    def _uploaded(self) -> Iterator[str]:
        with tempfile.TemporaryDirectory(prefix="b2batch-output-", dir=_scratch(None)) as folder:
            local = os.path.join(folder, self.base_name)
            yield local
            self.fs.put_atomically(local, self.path)

    def open(self, mode: str = "r") -> IO[Any]:
        """Read a local copy (``"r"``, ``"rb"``), or write a local file uploaded on close (``"w"``, ``"wb"``)."""
        if not self._native:
            return plain.open_(self, mode)
        folder = tempfile.mkdtemp(prefix="b2batch-open-", dir=_scratch(None))
        local = os.path.join(folder, self.base_name)
        if mode.startswith("r"):
            self.fs.copy_file_from_remote(self.path, local, force=True)
            handle = open(local, mode)  # noqa: SIM115 - closed by the caller
            shutil.rmtree(folder)  # the open handle keeps the data readable
            return handle
        if mode.startswith("w"):
            return _UploadOnClose(local, mode, self, folder)
        raise ValueError(f"RemoteTarget.open: mode {mode!r} is not supported; use 'r', 'rb', 'w' or 'wb'.")


class _UploadOnClose:
    """A local file object whose content is uploaded atomically when it is closed without an error."""

    def __init__(self, local: str, mode: str, target: RemoteTarget, folder: str) -> None:
        self._file = open(local, mode)  # noqa: SIM115
        self._local, self._target, self._folder = local, target, folder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def close(self, upload: bool = True) -> None:
        if self._file.closed:
            return
        self._file.close()
        try:
            if upload:
                self._target.fs.put_atomically(self._local, self._target.path)
        finally:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> _UploadOnClose:
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        self.close(upload=kind is None)


def _scratch(task: Any) -> str | None:
    """The scratch folder of ``task`` (made; None: the system's temporary folder), read when a target's
    method is called, as b2luigi's ``RemoteTarget.get_temporary_input(task)`` reads it: the task's
    ``scratch_dir``, the process's settings without a task (``open()`` and a write's ``temporary_path()``)."""
    from b2batch.settings import get_setting

    folder = get_setting("scratch_dir", task=task)
    if folder:
        os.makedirs(os.path.expanduser(folder), exist_ok=True)
        return os.path.expanduser(folder)
    return None
