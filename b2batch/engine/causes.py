"""Why a job ended, as one word shared by every part that cares: the ``cause`` of a job's end.

A batch system reads the cause from its own answer (a state, a hold code, an exit reason) and puts it on the
:class:`~b2batch.engine.jobstate.JobState` it reports; the run's policies (memory and time escalation, bad nodes:
:mod:`b2batch.engine.escalation`, :mod:`b2batch.engine.bad_nodes`), the accounting and the summary read it there.

- ``memory``: the job was killed for using more memory than it asked for (Slurm ``OUT_OF_MEMORY``, SGE exit
  137 with ``maxvmem`` at its ``h_vmem``, HTCondor hold code 34 or a hold reason about memory, LSF
  ``TERM_MEMLIMIT``);
- ``time``: killed at its time limit (Slurm ``TIMEOUT``/``DEADLINE``, SGE ``h_rt``, HTCondor a hold or removal
  for its run time (codes 46/47, ``MaxRuntime`` policies), LSF ``TERM_RUNLIMIT``);
- ``node``: the node, not the task, failed it (Slurm ``NODE_FAIL``/``BOOT_FAIL``, LSF ``UNKWN``/``ZOMBI``/
  ``TERM_HOST_LOST``, a job whose set-up failed before the task started, or that ended without its wrapper
  writing its exit code on a node that ran it);
- ``""``: nothing more than the exit code (the task's own end, or unknown).
"""

from __future__ import annotations

MEMORY = "memory"
TIME = "time"
NODE = "node"
#: Every cause a batch system may report.
CAUSES = (MEMORY, TIME, NODE)
#: How the summary names each cause.
WORDS = {MEMORY: "out of memory", TIME: "time limit", NODE: "node failure"}
