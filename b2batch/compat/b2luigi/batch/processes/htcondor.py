"""``b2luigi.batch.processes.htcondor``: ``HTCondorProcess`` is b2batch's HTCondor batch system.

``batch_system = HTCondorProcess`` (the class) or ``batch_system = "htcondor"`` (the name) both submit with b2batch's
``b2batch.systems.htcondor.HTCondorSystem`` (its settings: see ``b2batch settings``).
"""

from b2batch.systems.htcondor import HTCondorSystem

HTCondorProcess = HTCondorSystem

__all__ = ["HTCondorProcess"]
