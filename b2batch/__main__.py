"""The ``b2batch`` console script."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``b2batch`` command."""
    import argparse

    parser = argparse.ArgumentParser(prog="b2batch", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    emulate = commands.add_parser("emulate", help="Run a command with emulated scheduler tools on PATH.")
    emulate.add_argument("system", choices=["htcondor", "lsf"])
    emulate.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    settings = commands.add_parser("settings", help="Print settings.json.example (or --markdown).")
    settings.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "settings":
        from b2batch.settings import example_settings, settings_reference_markdown

        sys.stdout.write(settings_reference_markdown() if args.markdown else example_settings())
        return 0
    if args.command == "emulate":
        from b2batch.emulators import run_with_emulator

        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            parser.error("emulate needs a command after --")
        return run_with_emulator(args.system, cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
