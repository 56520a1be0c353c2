"""Command-line entry: ``python -m b2batch.emulators TOOL ARGS...``.

TOOL is an emulated tool (``condor_submit``, ``condor_q``, ``condor_history``, ``condor_rm``,
``bsub``, ``bjobs``, ``bkill``), ``inject`` (failure injection, see :mod:`.inject`),
``bin-dir SYSTEM DIR`` (write shims) or ``emulate SYSTEM -- CMD...`` (run CMD with the shims on PATH).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

import filelock

USAGE = """usage: python -m b2batch.emulators TOOL [ARGS...]
  tools:   condor_submit condor_q condor_history condor_rm bsub bjobs bkill
  inject SYSTEM KIND ...         failure injection (python -m b2batch.emulators inject -h)
  bin-dir SYSTEM DIR             write shims named like the real tools into DIR
  emulate SYSTEM -- CMD [ARGS]   run CMD with the emulated tools first on PATH
"""


def _command(name: str) -> Callable[[list[str]], int] | None:
    if name.startswith("condor_"):
        from b2batch.emulators import condor_tools

        return condor_tools.COMMANDS.get(name)
    if name in ("bsub", "bjobs", "bkill"):
        from b2batch.emulators import lsf_tools

        return lsf_tools.COMMANDS.get(name)
    if name == "inject":
        from b2batch.emulators import inject

        return inject.main
    if name == "runner":
        from b2batch.emulators import job_runner

        return job_runner.main
    return None


def main(argv: list[str] | None = None) -> int:
    """Dispatch on the tool name in ``argv[0]``."""
    args = sys.argv[1:] if argv is None else list(argv)
    logging.basicConfig(level=os.environ.get("B2BATCH_EMULATOR_LOGLEVEL", "WARNING"))
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    name, rest = os.path.basename(args[0]), args[1:]
    if name == "bin-dir" and len(rest) == 2:
        from b2batch.emulators import make_bin_dir

        print(make_bin_dir(rest[0], Path(rest[1])))
        return 0
    if name == "emulate" and len(rest) >= 2:
        from b2batch.emulators import run_with_emulator

        return run_with_emulator(rest[0], rest[2:] if rest[1] == "--" else rest[1:])
    command = _command(name)
    if command is None:
        sys.stderr.write(f"unknown tool {name!r}\n{USAGE}")
        return 2
    try:
        return command(rest)
    except filelock.Timeout as exc:  # another process holds the state lock for too long
        sys.stderr.write(f"ERROR: {name}: the emulator state is locked ({exc.lock_file}); try again later\n")
        return 255 if name.startswith("b") else 1


if __name__ == "__main__":
    sys.exit(main())
