"""Helpers shared by tests of several folders (imported as ``helpers.<module>``; ``tests/`` is on ``sys.path``
through the root conftest). Fixtures every test may use live in ``tests/conftest.py``.

* ``clusters``: is the local Slurm or SGE of ``tests/clusters/`` up; skip, or fail under CI, when not.
* ``emulated``: a workflow run under the HTCondor or LSF emulator, with an emulator state of its own.
* ``simulated``: a batch system in memory for engine tests, and a job to hand it.
"""
