"""Retries of remote operations: transient errors (the server down, a connection reset, a timeout, HTTP 5xx)
are retried with exponential back-off, each retry logged with the URL; what still fails, or fails for good
(no permission, a full disk), raises :class:`RemoteError` naming the operation, the URL and the fix."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from b2batch.errors import B2BatchError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class RemoteError(B2BatchError):
    """A remote file operation failed (after its retries, for a transient error)."""


class TransientRemoteError(Exception):
    """An error worth retrying: raised by the file systems' single attempts, never seen by users."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry: ``attempts`` tries in all, waiting ``first_wait`` seconds after the
    first failure, doubling up to ``max_wait`` seconds between tries."""

    attempts: int = 6
    first_wait: float = 0.5
    max_wait: float = 8.0

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"RetryPolicy: attempts is {self.attempts!r}, but it must be a whole number of at "
                             f"least 1 (e.g. 6).")
        if self.first_wait < 0 or self.max_wait < self.first_wait:
            raise ValueError(f"RetryPolicy: first_wait={self.first_wait!r} and max_wait={self.max_wait!r} must be "
                             f"0 <= first_wait <= max_wait (e.g. 0.5 and 8).")

    def call(self, operation: str, url: str, attempt: Callable[[], T], fix: str) -> T:
        """``attempt()`` with retries; ``operation`` and ``url`` say what it does in logs and errors."""
        started = time.monotonic()

        def log_retry(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            logger.warning("%s of %s failed (try %d of %d), retrying in %.1f s: %s", operation, url,
                           state.attempt_number, self.attempts, state.next_action.sleep if state.next_action else 0,
                           error)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=tenacity.wait_exponential(multiplier=self.first_wait, min=self.first_wait, max=self.max_wait),
            retry=tenacity.retry_if_exception_type(TransientRemoteError),
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except TransientRemoteError as error:
            raise RemoteError(
                f"{operation} of {url} failed {self.attempts} times over {time.monotonic() - started:.0f} s; the "
                f"last error: {error}. {fix}"
            ) from error
