"""luigi as a job's process imports it: without the HTTP client of luigi's RPC module.

luigi's ``rpc`` module, which ``import luigi`` loads, imports ``requests`` for ``RemoteScheduler``, the client of a
central scheduler (luigid); when ``requests`` is missing it takes a client of its own built on ``urllib``. Only the
steering process talks to a scheduler, never a job or a pilot, but each of them paid for ``requests`` and what it
loads (urllib3, charset_normalizer, idna, certifi, ...: some 200 modules, about 35 ms of a job's start and its
memory). A job's entry point imports luigi through :func:`import_luigi`, with ``requests`` unimportable for that
moment only: the task's own code imports ``requests`` as usual, and the steering process is not touched.
"""

from __future__ import annotations

import sys


def import_luigi() -> None:
    """Import luigi, its RPC module without ``requests`` (a job's process, before anything else imported luigi)."""
    if "luigi" in sys.modules or "requests" in sys.modules:
        return  # (already imported: nothing to gain, nothing to change)
    sys.modules["requests"] = None  # type: ignore[assignment]  # `import requests` raises ImportError
    try:
        import luigi  # noqa: F401
    finally:
        if "requests" in sys.modules and sys.modules["requests"] is None:
            del sys.modules["requests"]
