"""The ``test`` batch system: b2luigi's ``TestProcess`` under its name.

b2luigi's test scripts set ``batch_system = "test"``: each task runs as a job in a background process of this
machine, its stdout and stderr in the task's log files, its status from the process's exit code. That is
b2batch's ``local`` batch system, so ``test`` is that system under b2luigi's name (with ``local_slots``).
"""

from __future__ import annotations

from b2batch.systems.local import LocalSystem


class TestSystem(LocalSystem):
    """Background processes of this machine, as b2luigi's ``TestProcess`` runs them."""

    __test__ = False  # not a pytest test class
    name = "test"
