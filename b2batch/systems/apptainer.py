"""The ``apptainer`` batch system (b2luigi's): each task's job runs on this machine, as a ``local`` job, inside
the Apptainer (or Singularity) container of the ``apptainer_image`` setting.

What makes the job's command line is :mod:`b2batch.jobscript.containers`; this class only gives the local jobs their
own name, so that ``batch_system = "apptainer"`` asks for the container.
"""

from __future__ import annotations

from b2batch.systems.local import LocalSystem


class ApptainerSystem(LocalSystem):
    """Local background jobs, each in an Apptainer container (``apptainer_image``, ``apptainer_mounts``,
    ``apptainer_mount_defaults``, ``apptainer_additional_params``, ``apptainer_cmd``)."""

    name = "apptainer"
