"""``b2luigi.core.temporary_wrapper``: ``on_temporary_files``, ``TemporaryFileContextManager`` and
``EnsuredTemporaryScratchDirectory``.

Inside the context manager (which ``on_temporary_files`` is made of in b2luigi) the task's
``get_output_file_name`` gives temporary paths; they are moved into place when the block ends without an
exception and removed when it raises. Its input-path methods give copies of the inputs under ``scratch_dir``
(``inputs=True``, the default), removed at the end (b2batch.luigi_frontend.staging).
"""

from __future__ import annotations

import os
import tempfile
from types import TracebackType
from typing import Any

from b2batch import on_temporary_files
from b2batch.luigi_frontend.temporary import temporary_files

__all__ = ["EnsuredTemporaryScratchDirectory", "TemporaryFileContextManager", "on_temporary_files"]


class TemporaryFileContextManager:
    """``with TemporaryFileContextManager(task): ...``: the task's outputs are written to temporary paths
    within the block and moved into place only when it ends without an exception (``outputs``); its inputs
    are read from copies under scratch_dir (``inputs``)."""

    def __init__(self, task: Any, inputs: bool = True, outputs: bool = True) -> None:
        self._context = temporary_files(task, inputs=inputs, outputs=outputs)

    def __enter__(self) -> TemporaryFileContextManager:
        self._context.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool | None:
        return self._context.__exit__(kind, error, traceback)


class EnsuredTemporaryScratchDirectory(tempfile.TemporaryDirectory):  # type: ignore[type-arg]
    """``tempfile.TemporaryDirectory`` whose parent folder ``dir`` is made first when it is missing; a
    ``PermissionError`` there says to choose another ``scratch_dir``."""

    def __init__(self, dir: str | None = None, **kwargs: Any) -> None:  # noqa: A002 - tempfile's name
        try:
            if dir is not None:
                os.makedirs(dir, exist_ok=True)
            super().__init__(dir=dir, **kwargs)
        except PermissionError as error:
            raise PermissionError(
                f"You do not have the permission to write to the temporary directory {dir}! Choose a folder you "
                f"can write to as the setting 'scratch_dir', e.g. b2luigi.set_setting('scratch_dir', "
                f"'/path/to/scratch').") from error
