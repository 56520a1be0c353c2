"""``b2luigi.batch.processes.apptainer``: ``ApptainerProcess`` is b2batch's ``apptainer`` batch system.

``batch_system = ApptainerProcess`` (the class) or ``batch_system = "apptainer"`` (the name) both run each task
as a job on this machine inside the container of ``apptainer_image`` (with ``apptainer_mounts``,
``apptainer_mount_defaults``, ``apptainer_additional_params`` and ``apptainer_cmd``; docs/containers.md).
"""

from b2batch.systems.apptainer import ApptainerSystem

ApptainerProcess = ApptainerSystem

__all__ = ["ApptainerProcess"]
