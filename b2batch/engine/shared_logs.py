"""Reading many units' parts of a few shared log files (pilots' logs) without opening a file per part."""

from __future__ import annotations

import os


class SharedLogs:
    """Parts of log files many jobs write into (pilots' logs: every unit's part of them): each file opened once
    and read by position (``os.pread``), a few files kept open at a time. The logs are appended to only; a file
    that reads short (replaced meanwhile) is opened again."""

    #: Files kept open at most (the ones read longest ago are closed first).
    OPEN = 32

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def read(self, path: str, offset: int, size: int) -> bytes:
        for attempt in (0, 1):
            fd = self._fds.pop(path, None)
            if fd is None or attempt:
                if fd is not None:
                    os.close(fd)
                fd = os.open(path, os.O_RDONLY)
                while len(self._fds) >= self.OPEN:
                    os.close(self._fds.pop(next(iter(self._fds))))
            self._fds[path] = fd  # the newest last
            data = os.pread(fd, size, offset)
            if len(data) == size:
                return data
        return data

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
