"""engine/digests.py: the same hex digests as hashlib's, from CPython's own modules for small data (no OpenSSL import
on a run's path) and from hashlib for large data or where those modules are missing."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from b2batch.engine import digests


@pytest.mark.parametrize("size", [0, 1, 1000, digests.LARGE, digests.LARGE + 1])
def test_digests_are_hashlibs(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert digests.sha1_hex(data) == hashlib.sha1(data).hexdigest()
    assert digests.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_without_cpythons_own_modules_hashlib_serves(monkeypatch) -> None:
    monkeypatch.setattr(digests, "_SHA1", None)
    monkeypatch.setattr(digests, "_SHA256", None)
    assert digests.sha1_hex(b"abc") == hashlib.sha1(b"abc").hexdigest()
    assert digests.sha256_hex(b"abc") == hashlib.sha256(b"abc").hexdigest()


def test_small_digests_do_not_import_hashlib() -> None:
    code = ("import sys\nfrom b2batch.engine.digests import sha1_hex, sha256_hex\n"
            "sha1_hex(b'a'); sha256_hex(b'a')\nprint('hashlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
