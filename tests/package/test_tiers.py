"""The fast tier and the xdist groups (tests/helpers/tiers.py): a test that starts a workflow process, needs a
cluster or runs a whole workflow is slow; tests that share a cluster or measure time share an xdist group."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from helpers import tiers


@dataclass
class Stub:
    """What tiers reads of a collected test item."""

    fspath: str
    originalname: str = "test_something"
    fixturenames: list[str] = field(default_factory=list)
    markers: tuple[str, ...] = ()
    params: dict[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.originalname

    @property
    def callspec(self):
        return type("Spec", (), {"params": self.params})()

    def get_closest_marker(self, name: str):
        return object() if name in self.markers else None


def test_a_unit_test_is_fast_and_in_no_group() -> None:
    item = Stub("/r/tests/engine/test_engine.py", fixturenames=["tmp_path", "isolated"])
    assert not tiers.is_slow(item) and tiers.group_of(item) is None


@pytest.mark.parametrize("fixture", ["workflow", "emulated", "flows", "luigid", "xrootd_server", "workers"])
def test_a_test_that_takes_a_fixture_starting_processes_is_slow(fixture: str) -> None:
    assert tiers.is_slow(Stub("/r/tests/luigi/test_cli_flags.py", fixturenames=["tmp_path", fixture]))


def test_whole_workflows_and_process_files_are_slow() -> None:
    assert tiers.is_slow(Stub("/r/tests/e2e/test_faults.py"))
    assert tiers.is_slow(Stub("/r/tests/calls/test_pool.py"))
    assert tiers.is_slow(Stub("/r/tests/display/test_monitor.py",
                              "test_the_live_state_is_written_at_most_once_a_second_and_not_when_nothing_changed"))


@pytest.mark.parametrize("system", ["slurm", "sge"])
def test_a_cluster_by_marker_fixture_or_parameter_is_slow_and_in_that_clusters_group(system: str) -> None:
    for item in (Stub("/r/tests/systems/test_x.py", markers=(system,)),
                 Stub("/r/tests/systems/test_x.py", fixturenames=[system]),
                 Stub("/r/tests/engine/pilots/test_pilots.py", params={"system": system})):
        assert tiers.is_slow(item) and tiers.group_of(item) == system
    other = Stub("/r/tests/engine/pilots/test_pilots.py", params={"system": "lsf"})
    assert tiers.group_of(other) is None


def test_tests_that_measure_time_share_the_timing_group() -> None:
    assert tiers.group_of(Stub("/r/tests/engine/pilots/test_work_queue.py")) == "timing"
    assert tiers.group_of(Stub("/r/tests/farm/test_farm.py", "test_signal_puts_running_lines_back")) == "timing"
    assert tiers.group_of(Stub("/r/tests/farm/test_farm.py", "test_bad_input_gives_one_clear_error")) is None
