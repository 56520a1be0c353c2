"""Running scheduler commands: argument lists (never a shell), timeouts, retries of transient errors."""

from __future__ import annotations

import logging
import math
import re
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

import tenacity

from b2batch.errors import CommandNotFoundError, SchedulerCommandError, TransientCommandError

logger = logging.getLogger(__name__)

#: What schedulers print when they are busy or briefly unreachable: worth another try after a pause.
TRANSIENT = re.compile(
    r"Socket timed out|timed out|Submission rate too high|Resource temporarily unavailable|"
    r"Connection refused|Unable to contact slurm controller|Zero Bytes were transmitted|"
    r"Failed to connect|failed receiving gdi request|unable to contact qmaster|commlib error|"
    r"LSF is down|Failed in an LSF library call|not ready yet|daemon not responding|not responding|"
    r"Temporarily unable|Try again later|SCHEDD.*not respond|Failed to fetch ads",
    re.IGNORECASE,
)

#: What to check when a scheduler's program is missing.
NOT_FOUND_HINT = ("Is batch_system right, and is the scheduler's client installed on this host? (HTCondor and "
                  "LSF can be emulated: b2batch emulate htcondor|lsf -- COMMAND)")


class SchedulerCalls:
    """The scheduler commands of one batch system in one run: at most ``rate`` of them a second (the run's
    max_scheduler_calls_per_second; 0 or None: no cap), each told to ``on_call`` with its program's name (the
    run's record counts them). The cap holds over any window: at most ``n = max(1, floor(rate))`` commands in
    any ``n / rate`` seconds (5 a second: at most 5 in any second, so two commands a few milliseconds apart, a
    status query and the run's last wake of its pilots, say, need not wait a fifth of a second)."""

    def __init__(self, on_call: Callable[[str], None] | None = None, rate: float | None = 5.0) -> None:
        self.on_call = on_call
        self.rate = rate
        count = max(1, math.floor(rate)) if rate else 1
        #: When the last ``count`` commands ran (monotonic seconds), oldest first.
        self._recent: deque[float] = deque(maxlen=count)
        self._window = count / float(rate) if rate else 0.0
        self._lock = threading.Lock()

    def before(self, program: str) -> None:
        """Wait until the next command may run, and count it."""
        with self._lock:
            recent = self._recent
            if self.rate and len(recent) == recent.maxlen:
                pause = recent[0] + self._window - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            recent.append(time.monotonic())
        if self.on_call is not None:
            self.on_call(program)


def run(command: Sequence[str], timeout: float = 60.0, stdin: str | None = None, hint: str = "",
        check: bool = True, calls: SchedulerCalls | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``command`` once (after ``calls`` allows it, if given); a non-zero exit raises
    :class:`SchedulerCommandError` (transient ones :class:`TransientCommandError`) unless ``check`` is false."""
    command = [str(c) for c in command]
    if calls is not None:
        calls.before(command[0].rsplit("/", 1)[-1])
    try:
        # In a session of its own: a signal to the steering process's group (Ctrl-C, `timeout`, a CI runner)
        # stops the run, which then cancels its jobs with commands that the same signal must not kill.
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout,
                              start_new_session=True)
    except (FileNotFoundError, PermissionError) as e:  # as a shell: 127 not found, 126 not executable
        raise CommandNotFoundError(command, 127 if isinstance(e, FileNotFoundError) else 126, "", str(e),
                                   hint or NOT_FOUND_HINT) from e
    except subprocess.TimeoutExpired as e:
        raise TransientCommandError(command, None, _text(e.stdout), _text(e.stderr),
                                    f"No answer within {timeout:g} s.") from e
    if check and done.returncode != 0:
        error = TransientCommandError if TRANSIENT.search(done.stderr + done.stdout) else SchedulerCommandError
        raise error(command, done.returncode, done.stdout, done.stderr, hint)
    return done


def run_with_retries(command: Sequence[str], attempts: int = 4, timeout: float = 60.0,
                     stdin: str | None = None, hint: str = "",
                     calls: SchedulerCalls | None = None) -> subprocess.CompletedProcess[str]:
    """:func:`run`, trying transient failures again with exponential back-off (1, 2, 4 ... s)."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(TransientCommandError),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=1, max=30),
        before_sleep=lambda state: logger.warning("%s; trying again (%d of %d)", state.outcome.exception(),
                                                  state.attempt_number + 1, attempts),
        reraise=True,
    )
    return retrying(run, command, timeout=timeout, stdin=stdin, hint=hint, calls=calls)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value
