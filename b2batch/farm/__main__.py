"""``python -m b2batch.farm TASKLIST [options]``: the same as ``b2batch farm``."""

import sys

from b2batch.farm.command_line import main

sys.exit(main(prog="python -m b2batch.farm"))
