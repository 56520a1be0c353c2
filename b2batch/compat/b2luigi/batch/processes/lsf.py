"""``b2luigi.batch.processes.lsf``: ``LSFProcess`` is b2batch's LSF batch system.

``batch_system = LSFProcess`` (the class) or ``batch_system = "lsf"`` (the name) both submit with b2batch's
``b2batch.systems.lsf.LSFSystem`` (its settings: see ``b2batch settings``).
"""

from b2batch.systems.lsf import LSFSystem

LSFProcess = LSFSystem

__all__ = ["LSFProcess"]
