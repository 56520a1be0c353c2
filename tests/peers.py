"""The real tools b2batch's drop-ins replace, each in a venv of its own (``tests/peers/install.sh``).

``peer_python("b2luigi")`` is the path of that venv's Python. Where a venv is missing, the test is skipped,
except under the test command (``B2BATCH_REQUIRE_PEERS=1``), where it fails: CI must never skip a
differential test silently.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

INSTALL = Path(__file__).resolve().parent / "peers" / "install.sh"
NAMES = ("b2luigi", "joblib-htcondor", "pypoolparty", "pytaskfarmer")


def peers_root() -> Path:
    out = subprocess.run(["bash", str(INSTALL), "--print"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def peer_python(name: str) -> Path:
    """The Python of the venv that holds the real ``name``; skip (or fail under the test command) if absent."""
    if name not in NAMES:
        raise ValueError(f"unknown peer {name!r}: one of {', '.join(NAMES)}")
    python = peers_root() / name / "bin" / "python"
    if not python.exists():
        message = f"the real {name} is not installed: run bash tests/peers/install.sh"
        if os.environ.get("B2BATCH_REQUIRE_PEERS"):
            pytest.fail(message)
        pytest.skip(message)
    return python
