"""``b2batch farm``: a restartable task-list farmer on local cores or as pilot jobs, a PyTaskFarmer drop-in.

- :mod:`~b2batch.farm.tasklist`: lines, ids, the list's hash, task-list handlers;
- :mod:`~b2batch.farm.workdir`: the shared work dir (``toprocess``, ``finished``, ``failed``, logs, timeline,
  claims and heartbeats) under one lock;
- :mod:`~b2batch.farm.runners`: how a line runs (shell, containers, INI-defined runners);
- :mod:`~b2batch.farm.farmer`: one farmer process and its pool of lines;
- :mod:`~b2batch.farm.stopping`: the stop signals, the exit status of each stop, lines that cannot start;
- :mod:`~b2batch.farm.farm_pilots`: pilot jobs through the engine, with progress and the end summary;
- :mod:`~b2batch.farm.command_line`: ``b2batch farm`` and ``pytaskfarmer.py``.
"""

from b2batch.farm.definitions import FarmError
from b2batch.farm.farmer import Farmer, FarmerOptions
from b2batch.farm.workdir import WorkDir

__all__ = ["FarmError", "Farmer", "FarmerOptions", "WorkDir"]
