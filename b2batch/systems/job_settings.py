"""The settings that shape the job of every built-in batch system: what its wrapper runs, where and how.

Each batch system declares the settings that shape its jobs in ``job_settings`` (the engine's
:class:`~b2batch.engine.BatchSystem`), these ones and its own submit options; the engine groups units into
pilot and bundle jobs by exactly those, and knows no setting by name.
"""

from __future__ import annotations

#: Settings the job wrapper of every built-in batch system reads: its command, environment, folder, shell,
#: name and container.
WRAPPER_SETTINGS = ("executable", "env_script", "env", "working_dir", "shell", "job_name", "container",
                    "apptainer_image", "apptainer_mounts", "apptainer_mount_defaults", "apptainer_additional_params",
                    "apptainer_cmd")
