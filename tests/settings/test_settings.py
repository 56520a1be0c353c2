"""The settings chain: task > set_setting > nearest settings.json > parent settings.json > default argument >
declared default; the settings file named by an environment variable; errors and warnings; file caching."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import b2batch
from b2batch import settings
from b2batch.settings import reference
from b2batch.errors import SettingError

REPO = Path(__file__).resolve().parents[2]


def write_settings(folder: Path, **values: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "settings.json"
    path.write_text(json.dumps(values))
    return path


class FakeClock:
    """The settings files' clock: under b2batch's profile a file is checked again after CHECK_INTERVAL."""

    def __init__(self) -> None:
        self.now = 1000.0

    def tick(self) -> None:
        self.now += 1.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(settings, "_monotonic", lambda: fake.now)
    return fake


class PlainTask(b2batch.Task):
    pass


class AttributeTask(b2batch.Task):
    job_name = "from-attribute"


class PropertyTask(b2batch.Task):
    n = b2batch.IntParameter(default=3)

    @property
    def job_name(self) -> str:
        return f"from-property-{self.n}"


class MethodTask(b2batch.Task):
    n = b2batch.IntParameter(default=4)

    def job_name(self) -> str:
        return f"from-method-{self.n}"


# --- the chain, link by link -------------------------------------------------------------------------------

def test_each_source_wins_over_the_next_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            clock: FakeClock) -> None:
    """Remove the sources one by one, from the first in the chain on, and watch the next one take over."""
    work = tmp_path / "project" / "work"
    write_settings(work.parent, job_name="from-parent-file")
    write_settings(work, job_name="from-nearest-file")
    monkeypatch.chdir(work)
    b2batch.set_setting("job_name", "from-set-setting")

    assert b2batch.get_setting("job_name", task=AttributeTask(), default="x") == "from-attribute"
    assert b2batch.get_setting("job_name", task=PropertyTask(n=7)) == "from-property-7"
    assert b2batch.get_setting("job_name", task=MethodTask(n=8)) == "from-method-8"

    assert b2batch.get_setting("job_name", task=PlainTask(), default="x") == "from-set-setting"
    b2batch.clear_setting("job_name")
    assert b2batch.get_setting("job_name", task=PlainTask(), default="x") == "from-nearest-file"
    (work / "settings.json").unlink()
    clock.tick()
    assert b2batch.get_setting("job_name", default="x") == "from-parent-file"
    (work.parent / "settings.json").unlink()
    clock.tick()
    assert b2batch.get_setting("job_name", default="x") == "x"
    assert b2batch.get_setting("job_name") is None  # the declared default
    assert b2batch.get_setting("result_dir") == "results"


def test_nearest_file_wins_key_by_key_and_parents_fill_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_settings(tmp_path, result_dir="top", log_dir="top-logs")
    write_settings(tmp_path / "sub", result_dir="sub")
    monkeypatch.chdir(tmp_path / "sub")
    assert b2batch.get_setting("result_dir") == "sub"
    assert b2batch.get_setting("log_dir") == "top-logs"
    monkeypatch.chdir(tmp_path)  # the working directory counts, not where the cache was filled
    assert b2batch.get_setting("result_dir") == "top"


def test_clear_setting_of_an_unset_key_is_no_error() -> None:
    b2batch.clear_setting("job_name")
    b2batch.clear_setting("no_such_setting")


def test_set_setting_of_a_task_attribute_does_not_override_it() -> None:
    b2batch.set_setting("job_name", "global")
    assert b2batch.get_setting("job_name", task=AttributeTask()) == "from-attribute"


def test_default_argument_beats_declared_default_but_not_files(tmp_path: Path, clock: FakeClock) -> None:
    assert b2batch.get_setting("log_dir", default="mine") == "mine"
    write_settings(tmp_path, log_dir="file")
    clock.tick()
    assert b2batch.get_setting("log_dir", default="mine") == "file"


def test_falsy_values_are_values(tmp_path: Path) -> None:
    """0, false, "" and null in a settings file are values, not 'unset'."""
    write_settings(tmp_path, use_parameter_name_in_output=False, local_slots=0, job_name="", env_script=None)
    assert b2batch.get_setting("use_parameter_name_in_output") is False
    assert b2batch.get_setting("local_slots", default=5) == 0
    assert b2batch.get_setting("job_name", default="x") == ""
    assert b2batch.get_setting("env_script", default="x") is None


# --- a settings file named by an environment variable ------------------------------------------------------

@pytest.mark.parametrize("variable", ["B2BATCH_SETTINGS", "B2LUIGI_SETTINGS_JSON"])
def test_environment_variable_names_the_only_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          variable: str) -> None:
    write_settings(tmp_path, result_dir="from-cwd", log_dir="cwd-logs")
    named = tmp_path / "elsewhere" / "mine.json"
    named.parent.mkdir()
    named.write_text(json.dumps({"result_dir": "from-named-file"}))
    monkeypatch.setenv(variable, str(named))
    assert b2batch.get_setting("result_dir") == "from-named-file"
    assert b2batch.get_setting("log_dir") == "logs"  # the file in the working directory is not read
    monkeypatch.delenv(variable)
    assert b2batch.get_setting("result_dir") == "from-cwd"


def test_environment_variable_naming_a_missing_file_is_a_clear_error(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("B2BATCH_SETTINGS", str(tmp_path / "nope.json"))
    with pytest.raises(SettingError) as error:
        b2batch.get_setting("result_dir")
    assert "nope.json" in str(error.value)
    assert "B2BATCH_SETTINGS" in str(error.value)


# --- errors and warnings ------------------------------------------------------------------------------------

def test_setting_without_any_value_names_it_and_the_places_to_set_it() -> None:
    with pytest.raises(SettingError) as error:
        b2batch.get_setting("my_own_setting", task=PlainTask())
    message = str(error.value)
    assert "'my_own_setting'" in message
    assert "PlainTask" in message
    for place in ("attribute of the task", "set_setting", "settings.json", "B2BATCH_SETTINGS"):
        assert place in message


def test_declared_required_setting_without_value_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    required = settings.Setting("needed", None, "A setting without a usable default.", required=True)
    monkeypatch.setitem(settings.SETTINGS, "needed", required)
    with pytest.raises(SettingError, match="'needed'"):
        b2batch.get_setting("needed")
    assert b2batch.get_setting("needed", default=1) == 1
    b2batch.set_setting("needed", 2)
    assert b2batch.get_setting("needed") == 2


def test_misspelt_name_in_settings_file_is_an_error_naming_the_file_and_the_known_ones(tmp_path: Path) -> None:
    path = write_settings(tmp_path, result_dri="x", _comment="keys starting with _ are comments")
    with pytest.raises(SettingError) as error:
        b2batch.get_setting("result_dir")
    message = str(error.value)
    assert message.startswith(f"In the settings file {path}: 'result_dri' is not a known setting. Did you mean "
                              f"'result_dir'? Rename it (known settings: ")
    assert "\n" not in message and "(default " not in message
    assert all(name in message for name in settings.SETTINGS)


def test_misspelt_name_passed_to_set_setting_stops_the_check(caplog) -> None:
    b2batch.set_setting("log_dri", "x")
    assert not caplog.records  # the check before the run says it, once
    with pytest.raises(SettingError, match="'log_dri' is not a known setting. Did you mean 'log_dir'"):
        settings.check_settings()


def test_known_names_do_not_warn(tmp_path: Path) -> None:
    write_settings(tmp_path, result_dir="r", env={"A": "1"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b2batch.set_setting("log_dir", "l")
        assert b2batch.get_setting("result_dir") == "r"


def test_malformed_settings_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{\n  "result_dir": "r",\n  "log_dir": "l",\n}\n')  # trailing comma on line 3
    with pytest.raises(SettingError) as error:
        b2batch.get_setting("result_dir")
    message = str(error.value)
    assert str(path) in message
    assert "line 4" in message


def test_settings_file_must_hold_an_object(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('["result_dir", "r"]')
    with pytest.raises(SettingError, match="one JSON object"):
        b2batch.get_setting("result_dir")


# --- the settings file is parsed once and re-read when it changes ------------------------------------------

@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The settings files read, in order (a wrapper around the one function that parses them)."""
    calls: list[Path] = []
    original = settings._read_settings_file

    def counting(path: Path) -> dict[str, object]:
        calls.append(path)
        return original(path)

    monkeypatch.setattr(settings, "_read_settings_file", counting)
    return calls


def rewrite(path: Path, **values: object) -> None:
    """Write new content with a new modification time (file systems may have coarse time stamps)."""
    stat = path.stat()
    path.write_text(json.dumps(values))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_settings_file_is_parsed_once_for_many_lookups(tmp_path: Path, reads: list[Path], clock: FakeClock) -> None:
    path = write_settings(tmp_path, result_dir="one", log_dir="l")
    for i in range(200):
        assert b2batch.get_setting("result_dir", task=PlainTask()) == "one"
        assert b2batch.get_setting("log_dir") == "l"
    assert reads == [path]


def test_changed_settings_file_is_read_again(tmp_path: Path, reads: list[Path], clock: FakeClock) -> None:
    path = write_settings(tmp_path, result_dir="one")
    assert b2batch.get_setting("result_dir") == "one"
    rewrite(path, result_dir="two, longer")
    clock.tick()
    assert b2batch.get_setting("result_dir") == "two, longer"
    assert b2batch.get_setting("result_dir") == "two, longer"
    assert reads == [path, path]


def test_same_size_change_is_noticed_by_its_time_stamp(tmp_path: Path, reads: list[Path],
                                                       clock: FakeClock) -> None:
    path = write_settings(tmp_path, result_dir="aaa")
    assert b2batch.get_setting("result_dir") == "aaa"
    rewrite(path, result_dir="bbb")
    clock.tick()
    assert b2batch.get_setting("result_dir") == "bbb"


def test_new_and_removed_settings_files_are_noticed(tmp_path: Path, reads: list[Path], clock: FakeClock) -> None:
    assert b2batch.get_setting("result_dir") == "results"
    path = write_settings(tmp_path, result_dir="new")
    clock.tick()
    assert b2batch.get_setting("result_dir") == "new"
    path.unlink()
    clock.tick()
    assert b2batch.get_setting("result_dir") == "results"


def test_changing_directory_or_variable_takes_effect_at_once(tmp_path: Path, reads: list[Path], clock: FakeClock,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    write_settings(tmp_path / "a", result_dir="a")
    write_settings(tmp_path / "b", result_dir="b")
    monkeypatch.chdir(tmp_path / "a")
    assert b2batch.get_setting("result_dir") == "a"
    monkeypatch.chdir(tmp_path / "b")
    assert b2batch.get_setting("result_dir") == "b"  # without waiting for the check interval
    monkeypatch.setenv("B2BATCH_SETTINGS", str(tmp_path / "a" / "settings.json"))
    assert b2batch.get_setting("result_dir") == "a"


# --- the documented list of settings -----------------------------------------------------------------------

def test_settings_json_example_is_the_generated_one() -> None:
    generated = subprocess.run([sys.executable, "-m", "b2batch", "settings"], capture_output=True, text=True,
                               check=True).stdout
    example = REPO / "settings.json.example"
    assert example.is_file(), f"{example} is missing: python -m b2batch settings > settings.json.example"
    assert example.read_text() == generated, "settings.json.example is stale: regenerate it with " \
                                             "python -m b2batch settings > settings.json.example"


def test_example_settings_are_valid_json_with_every_setting_and_its_default() -> None:
    data = json.loads(reference.example_settings())
    for name, declared in settings.SETTINGS.items():
        assert data[name] == declared.default
        assert data[f"_{name}"] == declared.help


def test_example_settings_file_loads_without_warnings(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(reference.example_settings())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert b2batch.get_setting("result_dir") == "results"


def test_b2luigi_setting_names_are_known() -> None:
    for name in ("result_dir", "log_dir", "task_file_dir", "scratch_dir", "batch_system", "env_script", "env",
                 "executable", "working_dir", "job_name", "htcondor_settings", "transfer_files",
                 "slurm_settings", "queue", "job_slots", "parameter_separator", "use_parameter_name_in_output",
                 "shell"):
        assert name in settings.SETTINGS


def test_b2luigis_scratch_dir_default_is_the_systems_temporary_folder_worked_out_when_read(monkeypatch) -> None:
    import tempfile

    from b2batch import settings

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() works it out again
    monkeypatch.setenv("TMPDIR", str(Path.cwd()))
    with settings.using_store(settings.Store(profile="b2luigi")):
        assert settings.default_of("scratch_dir") == tempfile.gettempdir() == str(Path.cwd())
        assert settings.get_setting("scratch_dir") == str(Path.cwd())
