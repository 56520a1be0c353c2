"""``b2luigi.batch.processes.slurm``: ``SlurmProcess`` is b2batch's Slurm batch system.

``batch_system = SlurmProcess`` (the class) or ``batch_system = "slurm"`` (the name) both submit with b2batch's
``b2batch.systems.slurm.SlurmSystem`` (its settings: see ``b2batch settings``).
"""

from b2batch.systems.slurm import SlurmSystem

SlurmProcess = SlurmSystem

__all__ = ["SlurmProcess"]
