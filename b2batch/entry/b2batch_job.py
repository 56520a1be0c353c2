"""Node-side entry point of a b2batch job: ``<executable> b2batch_job.py <job.json>`` runs one task.

It is a file, not a module, so that any executable that runs Python scripts can run it. Its folder holds
nothing else, so nothing here shadows the user's modules.
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    del sys.path[0]
    try:
        import b2batch.luigi_frontend.node
    except ImportError:  # b2batch used from a source checkout that is not installed
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        import b2batch.luigi_frontend.node
    sys.exit(b2batch.luigi_frontend.node.main(sys.argv[1:]))
