"""b2luigi's ``with_new_settings()`` (``b2luigi.core.settings``), which b2luigi's tests of ``b2luigi test`` use:
a block without the settings set in code, and those of before back after it, also when the block raises."""

from __future__ import annotations

import pytest

from b2luigi.core.settings import get_setting, set_setting, with_new_settings
from b2batch.settings import clear_setting


def test_a_block_starts_without_the_settings_set_in_code_and_restores_them() -> None:
    set_setting("result_dir", "outer_results")
    try:
        with with_new_settings():
            assert get_setting("result_dir", default="unset") != "outer_results"
            set_setting("result_dir", "inner_results")
            set_setting("batch_system", "htcondor")
            assert get_setting("result_dir") == "inner_results"
        assert get_setting("result_dir") == "outer_results"
        assert get_setting("batch_system", default="none") != "htcondor"
    finally:
        clear_setting("result_dir")


def test_the_settings_of_before_come_back_when_the_block_raises() -> None:
    set_setting("result_dir", "outer_results")
    try:
        with pytest.raises(RuntimeError), with_new_settings():
            set_setting("result_dir", "inner_results")
            raise RuntimeError("stop")
        assert get_setting("result_dir") == "outer_results"
    finally:
        clear_setting("result_dir")
