"""Fast process entry for shims and runners: ``python .../b2batch/emulators/_entry.py TOOL ARGS...``.

The emulators need nothing from the rest of b2batch, and ``import b2batch`` loads nothing until a name of
it is used, so ``b2batch.emulators`` loads in a few milliseconds. Same behaviour as
``python -m b2batch.emulators TOOL ARGS...``.
"""

import os
import sys


def _bootstrap() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]  # never let our module names shadow top-level ones
    root = os.path.dirname(os.path.dirname(here))
    if root not in sys.path:
        sys.path.insert(0, root)  # b2batch from a source checkout that is not installed


if __name__ == "__main__":
    _bootstrap()
    from b2batch.emulators.__main__ import main

    sys.exit(main(sys.argv[1:]))
