"""Tasks of a batch run that stay on this machine without a job (b2luigi's ``batch_system = "local"``), each in
a forked child process while others run, as luigi's worker runs tasks when it has more than one worker.

The graph runner starts a task here with :meth:`LocalChildren.start`; the child runs it as luigi's worker runs a
task (its events, dynamic requirements, the check of its requirements) and sends back its result; the runner
collects the results with :meth:`LocalChildren.ended` and waits for them with :meth:`LocalChildren.wait`. A child
that dies without a result (a signal, ``os._exit``) fails its task, saying how it ended.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import signal
from dataclasses import dataclass
from typing import Any

from luigi.scheduler import FAILED

from b2batch.luigi_frontend import seam
from b2batch.luigi_frontend.jobs import TaskResult
from b2batch.luigi_frontend.task_on_node import StatusReporter

#: fork, as luigi's worker uses: the child has the script's classes and settings without importing anything.
_FORK = multiprocessing.get_context("fork")


@dataclass
class _Child:
    """One running task: its child process and the receiving end of the pipe its result comes through."""

    task: Any
    process: Any
    receiver: multiprocessing.connection.Connection


def _run_child(task: Any, worker_id: str, check_requirements: bool,
               sender: multiprocessing.connection.Connection) -> None:  # pragma: no cover - in the child
    """The child's work: run ``task`` as luigi's worker would, send (status, explanation, new requirements)."""
    status, explanation, _missing, new_deps = seam.run_in_process(task, worker_id, StatusReporter(),
                                                                  check_requirements=check_requirements)
    sender.send((status, explanation, new_deps))
    sender.close()


class LocalChildren:
    """The tasks running in child processes of the steering process, by task id."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.running: dict[str, _Child] = {}

    def __len__(self) -> int:
        return len(self.running)

    def start(self, task: Any, check_requirements: bool = True) -> None:
        """Run ``task`` in a new child process."""
        receiver, sender = _FORK.Pipe(duplex=False)
        process = _FORK.Process(target=_run_child, args=(task, self.worker_id, check_requirements, sender),
                                name=f"b2batch-local-{task.task_id}", daemon=True)
        process.start()
        sender.close()  # the child has its own copy: end of file here when it is gone
        self.running[task.task_id] = _Child(task, process, receiver)

    def wait(self, timeout: float) -> None:
        """Return when a child sent its result or ended, or after ``timeout`` seconds."""
        handles: list[Any] = [c.receiver for c in self.running.values()]
        handles += [c.process.sentinel for c in self.running.values()]
        if handles:
            multiprocessing.connection.wait(handles, timeout=timeout)

    def ended(self) -> list[TaskResult]:
        """The results of the children that ended since the last call (a child that sent none: FAILED)."""
        results = []
        for task_id, child in list(self.running.items()):
            result = self._result_of(child)
            if result is not None:
                del self.running[task_id]
                results.append(result)
        return results

    @staticmethod
    def _result_of(child: _Child) -> TaskResult | None:
        """The child's result when it sent one or ended without; None while it runs."""
        if child.receiver.poll(0):  # a pipe's poll (no wait), not a run's
            try:
                status, explanation, new_deps = child.receiver.recv()
            except (EOFError, OSError):
                pass  # it ended without a result: judged below
            else:
                child.process.join()
                child.receiver.close()
                return TaskResult(child.task, status, explanation, new_deps)
        if child.process.is_alive():
            return None
        child.process.join()
        child.receiver.close()
        code = child.process.exitcode
        how = f"was killed by signal {-code} ({_signal_name(-code)})" if code and code < 0 else \
            f"exited with status {code}"
        return TaskResult(child.task, FAILED, f"The process that ran {child.task} {how} before it reported a result.",
                          [])

    def kill(self) -> None:
        """End every child (the run was interrupted)."""
        for child in self.running.values():
            with contextlib.suppress(Exception):
                child.process.kill()
                child.process.join(timeout=5)
        self.running.clear()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
