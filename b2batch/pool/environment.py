"""The calling process's environment, as a pool exports it into its jobs (the ``env`` setting).

pypoolparty writes the caller's whole ``os.environ`` into the job's script. b2batch exports it too, except
what must not cross from the submit host into a job:

- what a batch system sets for each job, which the job must see as its own: ``SLURM_*``, ``SBATCH_*``,
  ``SGE_*``, ``JOB_ID``, ``JOB_NAME``, ``JOB_SCRIPT``, ``TASK_ID``, ``NSLOTS``, ``NHOSTS``, ``NQUEUES``,
  ``PE``, ``PE_HOSTFILE``, ``QUEUE``, ``ENVIRONMENT``, ``RESTARTED``, ``REQUEST``, ``LSB_*``, ``LSF_*``,
  ``_CONDOR_*``, ``PBS_*``, ``TMPDIR`` (a per-job scratch folder on many clusters), ``HOSTNAME``, ``HOST``;
- what belongs to the calling shell and login: ``PWD``, ``OLDPWD``, ``SHLVL``, ``_``, ``PS1``,
  ``PROMPT_COMMAND``, ``COLUMNS``, ``LINES``, the session's handles (``SSH_*``, ``DISPLAY``, ``XAUTHORITY``,
  ``DBUS_SESSION_BUS_ADDRESS``, ``XDG_RUNTIME_DIR``, ``XDG_SESSION_*``), exported shell functions
  (``BASH_FUNC_*``);
- b2batch's own per-job variables (``B2BATCH_LOCAL_JOB_ID``) and a test runner's (``PYTEST_*``);
- anything whose name is no shell variable name (the job's wrapper exports each with ``export NAME=...``).

Variables the pool's ``env`` setting names win over the caller's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

#: Prefixes of variables that stay on the submit host.
PREFIXES = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SGE_", "LSB_", "LSF_", "_CONDOR_", "PBS_", "SSH_",
            "XDG_SESSION_", "BASH_FUNC_", "PYTEST_", "B2BATCH_LOCAL_")
#: Names of variables that stay on the submit host.
NAMES = frozenset({
    "JOB_ID", "JOB_NAME", "JOB_SCRIPT", "TASK_ID", "NSLOTS", "NHOSTS", "NQUEUES", "PE", "PE_HOSTFILE", "QUEUE",
    "ENVIRONMENT", "RESTARTED", "REQUEST", "TMPDIR", "HOSTNAME", "HOST", "PWD", "OLDPWD", "SHLVL", "_", "PS1",
    "PS2", "PROMPT_COMMAND", "DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "COLUMNS",
    "LINES",
})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def crosses(name: str) -> bool:
    """Whether the variable ``name`` of the caller is exported into the jobs."""
    return bool(_NAME.match(name)) and name not in NAMES and not name.startswith(PREFIXES)


def exported(environ: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``environ`` (default: this process's) that cross into jobs, updated by ``extra``."""
    source = os.environ if environ is None else environ
    found = {name: value for name, value in source.items() if crosses(name)}
    found.update({str(k): str(v) for k, v in (extra or {}).items()})
    return found
