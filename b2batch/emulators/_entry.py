"""Fast process entry for shims and runners: ``python .../b2batch/emulators/_entry.py TOOL ARGS...``.

The emulators need nothing from the rest of b2batch, but ``import b2batch`` loads luigi (~0.4 s).
Run as a script, this file registers a bare ``b2batch`` package object (same ``__path__``) when b2batch
is not imported yet, so ``b2batch.emulators`` loads in a few milliseconds. Same behaviour as
``python -m b2batch.emulators TOOL ARGS...``.
"""

import os
import sys
import types


def _bootstrap() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
        del sys.path[0]  # never let our module names shadow top-level ones
    package_dir = os.path.dirname(here)
    if "b2batch" not in sys.modules:
        package = types.ModuleType("b2batch", "b2batch (bare package loaded for the emulators only)")
        package.__path__ = [package_dir]
        package.__file__ = os.path.join(package_dir, "__init__.py")
        sys.modules["b2batch"] = package


if __name__ == "__main__":
    _bootstrap()
    from b2batch.emulators.__main__ import main

    sys.exit(main(sys.argv[1:]))
