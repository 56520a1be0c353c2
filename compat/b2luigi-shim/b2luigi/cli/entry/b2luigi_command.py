"""The ``b2luigi`` command run as a file: what a job of ``test_task(batch=True)`` runs again to rebuild its task
when the program that called ``test_task`` is not the command itself (pytest, a user's script)."""

import sys

from b2luigi.cli import main

if __name__ == "__main__":
    sys.exit(main())
