"""The luigi front-end's resolver of the settings a task's own code handles its files with: ``scratch_dir``,
``remote_retries`` and ``n_download_threads``.

These are read where the task's methods run (its ``output()``, ``run()`` under ``on_temporary_files``,
``remove_output()``), in the steering process and in the task's job alike, not when a job is made, so
``remote_retries`` and ``n_download_threads`` are no part of a job's JobConfig. ``scratch_dir`` is (a container
mounts it): in the task's own job it is the JobConfig's value (:mod:`.job_on_node`). :class:`FileSettings` reads
each of them for its task once, when first needed (``on_temporary_files`` makes one per ``run()``), with the
task's own value first, then the settings chain (:func:`~b2batch.settings.get_setting`); the remote file
systems (:mod:`b2batch.remote.outputs`) and the staging of inputs (:mod:`.staging`) get the values and look
nothing up.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from b2batch.luigi_frontend.job_on_node import node_job
from b2batch.settings import get_setting

if TYPE_CHECKING:
    from b2batch.remote.backoff import RetryPolicy

#: The number of inputs ``on_temporary_files`` copies at once under the b2luigi profile, when not set.
DOWNLOAD_THREADS = 2


class FileSettings:
    """The file settings of ``task`` (None: the process's settings), each resolved once, when first read."""

    def __init__(self, task: Any = None) -> None:
        self.task = task

    @functools.cached_property
    def scratch_dir(self) -> str | None:
        """The folder of temporary files (None: the caller's fallback, next to the output or the system's); in the
        task's job, the one its job was made with (which a container mounts)."""
        job = node_job(self.task)
        return job.config["scratch_dir"] if job is not None else get_setting("scratch_dir", task=self.task)

    @functools.cached_property
    def download_threads(self) -> int | None:
        """How many inputs are copied at once when they are staged (None: one after the other)."""
        return get_setting("n_download_threads", default=DOWNLOAD_THREADS, task=self.task)

    @functools.cached_property
    def retry(self) -> RetryPolicy:
        """The retry policy of remote operations (``remote_retries`` tries); a SettingError naming the task when
        the value is no whole number of at least 1. Imports the remote package only when asked."""
        from b2batch.remote import outputs
        from b2batch.remote.backoff import RetryPolicy

        attempts = get_setting(outputs.RETRIES_SETTING, default=RetryPolicy.attempts, task=self.task)
        return outputs.retry_policy(attempts, self.task)
