"""b2luigi 1.3's own lines where b2batch does the same thing its own way, for the b2luigi profile (the
setting ``b2luigi_texts``): the log line of a task that starts as a batch job."""

from __future__ import annotations

import logging
from typing import Any

from b2batch import systems

#: luigi's logger, which b2luigi's batch processes log to.
luigi_logger = logging.getLogger("luigi-interface")

#: b2luigi's process class of each batch system it has.
_PROCESS_CLASS_NAMES = {"lsf": "LSFProcess", "htcondor": "HTCondorProcess", "slurm": "SlurmProcess",
                        "test": "TestProcess", "apptainer": "ApptainerProcess", "gbasf2": "Gbasf2Process"}


def process_class_name(value: Any, task: Any) -> str:
    """The name of the process class b2luigi would run ``task``'s job through, for the ``batch_system`` value
    ``value`` (a name or a class); a system b2luigi lacks is named after b2batch's (``sge``: ``SGEProcess``)."""
    if isinstance(value, type):
        return value.__name__
    name = systems.system_name_of(value)
    if name == "custom":
        return getattr(getattr(task, "process_class", None), "__name__", "CustomProcess")
    return _PROCESS_CLASS_NAMES.get(name, f"{name.upper()}Process")


def log_batch_process_start(value: Any, task: Any) -> None:
    """b2luigi's ``Batch process <Class> running  <task>`` when ``task``'s job starts (the caller logs it under the
    setting ``b2luigi_texts``: the b2luigi profile)."""
    luigi_logger.info("Batch process %s running  %s", process_class_name(value, task), task)
