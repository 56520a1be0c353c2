"""Every declared setting has a kind: a wrong value stops the run before it starts with one line that names
the setting, the value, where it was set and what it must be; nothing is computed or removed."""

from __future__ import annotations

import json

import pytest

import b2batch
from b2batch.errors import SettingError
from b2batch.settings import SETTINGS, get_setting


@pytest.mark.parametrize(("name", "value", "expects"), [
    ("local_slots", "abc", "a whole number of at least 0, or null"),
    ("poll_interval", "fast", "a number of at least 0"),
    ("result_dir", 5, "a path (a string)"),
    ("htcondor_settings", "request_cpus = 2", "a dict (a JSON object)"),
    ("max_jobs_in_flight", -1, "a whole number of at least 1, or null for none"),
    ("resubmit_failed_tasks", "yes", "true or false"),
])
def test_a_wrong_value_in_settings_json_stops_the_run_with_one_line(workflow, name, value, expects) -> None:
    flow = workflow("flags.py")
    (flow.folder / "settings.json").write_text(json.dumps({name: value}))
    done = flow.run("--batch", "--batch-system", "local")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: The setting "), done.stderr
    assert f"{name!r} is {value!r}" in lines[0] and f"must be {expects}" in lines[0]
    assert str(flow.folder / "settings.json") in lines[0]  # where it was set
    assert not (flow.folder / "results").exists() and not (flow.folder / "task_files").exists()


class Odd(b2batch.Task):
    max_resubmissions = "twice"


def test_a_wrong_value_on_a_task_names_the_task() -> None:
    with pytest.raises(SettingError, match=r"Task Odd\(\): the setting 'max_resubmissions' is 'twice' \(set as "
                                           r"an attribute of task Odd\(\)\), but it must be a whole number"):
        get_setting("max_resubmissions", task=Odd())


def test_values_of_the_right_kind_are_converted_where_that_is_unambiguous() -> None:
    b2batch.set_setting("poll_interval", "2.5")
    b2batch.set_setting("max_array_size", "100")
    assert get_setting("poll_interval") == 2.5 and get_setting("max_array_size") == 100
    b2batch.set_setting("max_array_size", 2.5)
    with pytest.raises(SettingError):
        get_setting("max_array_size")


def test_every_declared_default_is_of_its_own_kind() -> None:
    for setting in SETTINGS.values():
        if setting.kind is not None:
            assert setting.kind(setting.default) == setting.default, setting.name


def test_a_script_finds_the_settings_json_beside_it_from_anywhere(workflow, tmp_path) -> None:
    import subprocess
    import sys

    from conftest import clean_env

    flow = workflow("flags.py", folder=tmp_path / "project")
    (flow.folder / "settings.json").write_text(json.dumps({"result_dir": "beside"}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, str(flow.script), "--show-output"], cwd=elsewhere, env=clean_env(),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert str(flow.folder / "beside") in done.stdout, done.stdout
