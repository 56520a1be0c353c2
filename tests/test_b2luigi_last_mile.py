"""``import b2luigi``, the last mile (issue 40): what a b2luigi 1.3.0 user still met under the shim, each
matched to b2luigi (or listed as a difference). Whole scripts beside the real b2luigi are in the differential
corpus (``tests/differential/b2luigi/scripts``); the tests here check each point quickly, in this process or
in one subprocess, and against the real b2luigi where its answer is the point."""

from __future__ import annotations

from pathlib import Path

import pytest


# --- 2: clone_parent / clone_parents ---------------------------------------------------------------------

def test_inherits_gives_clone_parent_and_clone_parents_as_b2luigi_does(b2luigi) -> None:
    class Energy(b2luigi.Task):
        energy = b2luigi.IntParameter()
        seed = b2luigi.IntParameter()

    class Calibration(b2luigi.Task):
        energy = b2luigi.IntParameter()

    @b2luigi.inherits(Energy, Calibration, without="seed")
    class Merge(b2luigi.Task):
        pass

    merge = Merge(energy=3)
    assert merge.clone_parent(seed=1) == Energy(energy=3, seed=1)
    assert merge.clone_parents(seed=2) == [Energy(energy=3, seed=2), Calibration(energy=3)]
    # b2luigi's requires adds neither (only its inherits does)
    @b2luigi.requires(Calibration)
    class Plot(b2luigi.Task):
        pass

    assert not hasattr(Plot(energy=3), "clone_parent")
