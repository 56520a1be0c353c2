"""Hex digests for names and checks, without importing OpenSSL's :mod:`hashlib` (~2.5 ms) on a run's path.

CPython's own SHA-1 and SHA-256 modules (``_sha1``; ``_sha256``, ``_sha2`` from 3.12) give the same digests as
hashlib's. They load in microseconds but hash large data ~5x slower, so data above :data:`LARGE` goes to
hashlib, and hashlib serves where they are missing (a CPython built without them).
"""

from __future__ import annotations

from typing import Any, Callable

#: Bytes from which a digest is worth hashlib's import.
LARGE = 1 << 20


def _builtin(names: tuple[str, ...], attribute: str) -> Callable[[bytes], Any] | None:
    for name in names:
        try:
            return getattr(__import__(name), attribute)
        except (ImportError, AttributeError):
            continue
    return None


_SHA1 = _builtin(("_sha1",), "sha1")
_SHA256 = _builtin(("_sha256", "_sha2"), "sha256")


def sha1_hex(data: bytes) -> str:
    """SHA-1 of ``data``, in hex (names, not security)."""
    if _SHA1 is None or len(data) > LARGE:
        import hashlib

        return hashlib.sha1(data).hexdigest()
    return _SHA1(data).hexdigest()


def sha256_hex(data: bytes) -> str:
    """SHA-256 of ``data``, in hex."""
    if _SHA256 is None or len(data) > LARGE:
        import hashlib

        return hashlib.sha256(data).hexdigest()
    return _SHA256(data).hexdigest()
