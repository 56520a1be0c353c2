"""A worker's idle pause, which a signal ends at once.

The steering process of pilots on its own host sends them SIGCONT when it queued units while they were idle, or
told them to stop (``BatchSystem.wake``): the pause is a ``select`` on the read end of the pipe that
``signal.set_wakeup_fd`` writes a byte into for every signal, so a pilot claims its next unit, or ends, within a
millisecond instead of at the end of its pause (up to ``idle_pause``). A worker elsewhere waits out its pause.
"""

from __future__ import annotations

import os
import select
import signal
import time
from typing import Any


class IdleWait:
    """The idle pause of a worker, which any signal ends at once: the steering process of local pilots sends
    SIGCONT when it queued units while they were idle, or told them to stop (``BatchSystem.wake``); a worker
    elsewhere waits out its pause. (A signal's handler runs after the pause too; SIGCONT's does nothing.)"""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()
        os.set_blocking(self.read, False)
        os.set_blocking(self.write, False)
        try:
            self.previous: int | None = signal.set_wakeup_fd(self.write, warn_on_full_buffer=False)
            signal.signal(signal.SIGCONT, _woken)
        except ValueError:  # not the main thread (a worker served in tests): plain pauses
            self.previous = None

    def wait(self, seconds: float) -> None:
        if self.previous is None:
            time.sleep(seconds)
            return
        if select.select([self.read], [], [], seconds)[0]:
            try:
                while os.read(self.read, 512):
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        if self.previous is not None:
            signal.set_wakeup_fd(self.previous)
            signal.signal(signal.SIGCONT, signal.SIG_DFL)
        os.close(self.read)
        os.close(self.write)


def _woken(signum: int, frame: Any) -> None:
    """SIGCONT's handler: its byte in the wake-up pipe ends the pause."""
