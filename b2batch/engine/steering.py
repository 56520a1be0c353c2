"""The one loop that drives a run, and the front-end's side of it.

Every front-end drives its :class:`~b2batch.engine.run.Run` the same way (the graph runner of luigi tasks, the
calls executor of joblib and ``b2batch.Pool``, the farm's steering process)::

    feed      hand the run the work that can go now (submit, cancel)
    poll      the run's one status round: the jobs whose batch job ended come back, each with its outcome
    ended     the front-end judges each of them
    step      what next: poll AGAIN at once, WAIT (pause) first, or STOP: the front-end is done with the run

A front-end subclasses :class:`Steering` and implements ``feed``, ``ended`` and ``step``; ``drive(run, steering)``
runs the loop. What the front-end does around it (signals, progress, closing the run) stays its own. The one front-end
path that does not use it is a luigi graph driven by ``luigid``: there luigi's own worker loop asks each task's
stand-in process whether it is alive (``luigi_frontend/jobs.py``).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from b2batch.engine import collector

if TYPE_CHECKING:
    from b2batch.engine.job import Job
    from b2batch.engine.run import Run


class Step(enum.Enum):
    """What the loop does after a poll."""

    AGAIN = "again"  #: poll again at once: what just ended may have let more work go
    WAIT = "wait"  #: pause (``Steering.pause``), then feed and poll again
    STOP = "stop"  #: the front-end is done with the run


class Steering:
    """A front-end's side of driving one run (see the module's text)."""

    def feed(self) -> None:
        """Hand the run the work that can go now. Default: nothing (the work went in before the loop)."""

    def ended(self, job: Job) -> None:
        """A job whose batch job ended, with its ``job.outcome``, as the run's poll hands it back."""
        raise NotImplementedError

    def step(self, ended: int) -> Step:
        """After a poll that handed back ``ended`` jobs: poll again at once, wait first, or stop."""
        raise NotImplementedError

    def pause(self, run: Run) -> None:
        """The wait between two polls. Default: the run's poll pause."""
        run.wait()


def drive(run: Run, steering: Steering) -> None:
    """Drive ``run`` with ``steering`` until its ``step`` says STOP (meanwhile Python's collector leaves a
    unit's objects to die young: :mod:`b2batch.engine.collector`)."""
    with collector.steering():
        while True:
            steering.feed()
            ended = run.poll()
            for job in ended:
                steering.ended(job)
            step = steering.step(len(ended))
            if step is Step.STOP:
                return
            if step is Step.WAIT:
                steering.pause(run)
