"""``b2luigi.batch.processes.test``: ``TestProcess``, the ``test`` batch system of b2luigi's test scripts.

Each task runs as a background process of this machine with its output in the task's log files, as
``batch_system = "test"`` does (b2batch's ``local`` system under b2luigi's name).
"""

from b2batch.systems.testing import TestSystem

TestProcess = TestSystem

__all__ = ["TestProcess"]
