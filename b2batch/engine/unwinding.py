"""How a task's process ends when its job is cancelled: the first SIGTERM unwinds it once.

A cancelled unit can be sent SIGTERM more than once in an instant (the steering process marks it cancelled and
its worker passes that on; the batch system's kill reaches the worker, which passes that on too). The first
SIGTERM raises ``SystemExit(128 + 15)``, so that ``finally`` blocks and ``on_temporary_files`` remove what the
task had half written; later ones are ignored, because a second ``SystemExit`` raised inside that clean-up
would stop it half way and leave a temporary output behind. The batch system's (or the worker's) SIGKILL after
its grace time still ends a unit that does not unwind.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _unwind(signum: int, frame: FrameType | None) -> None:
    signal.signal(signum, signal.SIG_IGN)
    sys.exit(128 + signum)


def unwind_on_sigterm() -> None:
    """Install the handler: the first SIGTERM raises ``SystemExit(143)``; later ones are ignored."""
    signal.signal(signal.SIGTERM, _unwind)
