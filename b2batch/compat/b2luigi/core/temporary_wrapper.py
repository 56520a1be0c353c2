"""``b2luigi.core.temporary_wrapper``: ``on_temporary_files`` and ``TemporaryFileContextManager``.

Inside the context manager (which ``on_temporary_files`` is made of in b2luigi) the task's
``get_output_file_name`` gives temporary paths; they are moved into place when the block ends without an
exception and removed when it raises.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from b2batch.settings import get_setting
from b2batch.luigi_frontend.task import _TemporaryOutputs, on_temporary_files

__all__ = ["TemporaryFileContextManager", "on_temporary_files"]


class TemporaryFileContextManager:
    """``with TemporaryFileContextManager(task): ...``: the task's outputs are written to temporary paths
    within the block and moved into place only when it ends without an exception."""

    def __init__(self, task: Any, inputs: bool = True, outputs: bool = True) -> None:
        self._task = task
        self._outputs = outputs
        self._temporary: _TemporaryOutputs | None = None

    def __enter__(self) -> TemporaryFileContextManager:
        if self._outputs:
            self._temporary = _TemporaryOutputs(get_setting("scratch_dir", task=self._task))
            self._task._b2batch_temporary = self._temporary
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._temporary is None:
            return
        self._task._b2batch_temporary = None
        if kind is None:
            self._temporary.commit()
        else:
            self._temporary.discard()
