"""Reading many units' parts of a few shared log files (pilots' logs) without opening a file per part."""

from __future__ import annotations

import os


class SharedLogs:
    """Parts of log files many jobs write into (pilots' logs: every unit's part of them): each file opened once
    and read by position (``os.pread``), a few files kept open at a time. The logs are appended to only; a file
    that reads short (replaced meanwhile) is opened again.

    The parts of one worker's units follow one another in its logs, and the run asks for them in about that
    order: each read takes :data:`AHEAD_PARTS` times the part asked for (at most :data:`AHEAD` bytes), and the
    next parts come from those bytes (one system call for the short units of a poll, not two per unit; a few KiB
    per read, which a shared file system serves in one request as it serves a part alone)."""

    #: Files kept open at most (the ones read longest ago are closed first).
    OPEN = 32
    #: A read takes this many times the part asked for ...
    AHEAD_PARTS = 64
    #: ... up to this many bytes (a larger part: itself).
    AHEAD = 1 << 16

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        #: The bytes read last from each open file: (offset, data).
        self._read: dict[str, tuple[int, bytes]] = {}

    def read(self, path: str, offset: int, size: int) -> bytes:
        known = self._read.get(path)
        if known is not None and known[0] <= offset and offset + size <= known[0] + len(known[1]):
            return known[1][offset - known[0]:offset - known[0] + size]
        for attempt in (0, 1):
            fd = self._fds.pop(path, None)
            if fd is None or attempt:
                if fd is not None:
                    os.close(fd)
                fd = os.open(path, os.O_RDONLY)
                while len(self._fds) >= self.OPEN:
                    oldest = next(iter(self._fds))
                    os.close(self._fds.pop(oldest))
                    self._read.pop(oldest, None)
            self._fds[path] = fd  # the newest last
            data = os.pread(fd, max(size, min(size * self.AHEAD_PARTS, self.AHEAD)), offset)
            if len(data) >= size:
                if len(data) > size:  # what was read ahead is kept for the next parts (a large part is not)
                    self._read[path] = (offset, data)
                    return data[:size]
                self._read.pop(path, None)
                return data
            self._read.pop(path, None)
        return data

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._read.clear()
