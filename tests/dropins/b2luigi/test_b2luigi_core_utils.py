"""b2luigi's helpers of ``b2luigi.core`` (utils, temporary_wrapper, settings, remote_target.webdav) through the
shim: the command lines they build survive a shell whatever the values, paths resolve as b2luigi resolves them."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from b2batch.jobscript import base_folder


def _shell_argv(words: list[str]) -> list[str]:
    """What a shell makes of the words joined with spaces (as b2luigi's wrapper script joins them)."""
    script = f'for word in {" ".join(words)}; do printf "%s\\0" "$word"; done'
    return subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout.split("\0")[:-1]


def _task(b2luigi):
    class Sweep(b2luigi.Task):
        label = b2luigi.Parameter()
        values = b2luigi.ListParameter()

    return Sweep(label="it's $HOME; touch pwned", values=[1, 2, 3])


def test_cmd_from_task_keeps_each_parameter_one_word_in_a_shell(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core.utils import create_cmd_from_task

    task = _task(b2luigi)
    b2luigi.set_setting("__batch_runner_use_cli", True)
    b2luigi.set_setting("__batch_runner_task_file", "my tasks/tasks.py")
    b2luigi.set_setting("executable_prefix", ["nice", "-n", "5"])
    cmd = create_cmd_from_task(task)
    assert cmd[:4] == ["nice", "-n", "5", "b2luigi"] and cmd[4] == "batch-runner"  # no executable: the entry point
    argv = _shell_argv(cmd)
    assert argv[argv.index("--classname") + 1] == f"{type(task).__module__}.Sweep"
    params = [argv[i + 1] for i, word in enumerate(argv) if word == "--param"]
    assert params == ["label=it's $HOME; touch pwned", "values=[1, 2, 3]"]
    assert argv[argv.index("--task-file") + 1] == "my tasks/tasks.py"
    assert not (tmp_path / "pwned").exists()

    b2luigi.set_setting("executable", "python3")
    with pytest.raises(ValueError, match="executable needs to be a list"):
        create_cmd_from_task(task)


def test_cmd_from_task_without_the_cli_names_the_script_and_the_task_id(b2luigi, monkeypatch) -> None:
    from b2luigi.core import utils

    task = _task(b2luigi)
    monkeypatch.setenv("B2LUIGI_TASK_FILE", "/somewhere/my flow.py")
    cmd = utils.create_cmd_from_task(task)
    assert cmd[0] == sys.executable
    assert _shell_argv(cmd[1:]) == ["my flow.py", "--batch-runner", "--task-id", task.task_id]
    b2luigi.set_setting("add_filename_to_cmd", False)
    b2luigi.set_setting("task_cmd_additional_args", ["--verbose"])
    assert utils.create_cmd_from_task(task)[1:] == ["", "--batch-runner", "--task-id", shlex.quote(task.task_id),
                                                     "--verbose"]


def test_apptainer_command_is_an_argv_with_the_env_script_quoted(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core.utils import create_apptainer_command

    script = tmp_path / "env dir" / "setup.sh"
    b2luigi.set_setting("env_script", str(script))
    b2luigi.set_setting("apptainer_image", "/images/base.sif")
    b2luigi.set_setting("apptainer_cmd", "singularity")
    b2luigi.set_setting("apptainer_additional_params", "--cleanenv --nv")
    b2luigi.set_setting("apptainer_mounts", ["/cvmfs"])
    results = tmp_path.parent / f"{tmp_path.name}-results"  # outside the working directory: mounted
    b2luigi.set_setting("result_dir", str(results))
    b2luigi.set_setting("log_dir", str(tmp_path / "logs"))  # below the working directory: not mounted
    argv = create_apptainer_command("echo done", task=_task(b2luigi))
    assert argv == ["singularity", "exec", "--cleanenv", "--nv", "--bind", "/cvmfs", "--bind", str(results),
                    "/images/base.sif", "/bin/bash", "-c", f"source '{script}' && echo done"]
    assert results.is_dir() and (tmp_path / "logs").is_dir()  # made, as b2luigi makes them

    b2luigi.set_setting("batch_system", "gbasf2")
    with pytest.raises(ValueError, match="not supported for gbasf2"):
        create_apptainer_command("echo")
    b2luigi.clear_setting("env_script")
    with pytest.raises(ValueError, match="requires an environment setup script"):
        create_apptainer_command("echo")


def test_get_filename_and_map_folder_follow_the_script(b2luigi, monkeypatch, tmp_path: Path) -> None:
    from b2luigi.core import utils

    assert utils.map_folder("data") == str(tmp_path / "data")  # the base folder given (the test's, as a job's)
    assert utils.map_folder("/abs/data") == "/abs/data"
    monkeypatch.delenv(base_folder.BASE_DIR_VARIABLE)  # no base folder named: the script's
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "__file__", "/project/flow.py", raising=False)
    monkeypatch.setattr(main, "__spec__", None, raising=False)
    assert utils.map_folder("data") == "/project/data"
    monkeypatch.setenv("B2LUIGI_TASK_FILE", "sub/tasks.py")
    assert utils.get_filename() == str(tmp_path / "sub" / "tasks.py")
    monkeypatch.delenv("B2LUIGI_TASK_FILE")
    monkeypatch.delattr(main, "__file__")
    with pytest.raises(AttributeError, match=r"(?s)^Could not determine the current script location\..*__file__"):
        utils.map_folder("data")


def test_is_subdir() -> None:
    from b2luigi.core.utils import is_subdir

    assert is_subdir("/a/b/c", "/a/b") and is_subdir("/a/b", "/a/b/") and is_subdir("x/y", ".")
    assert not is_subdir("/a/bc", "/a/b") and not is_subdir("/a", "/a/b")


def test_ensure_requests_ca_bundle_merges_into_a_new_folder(b2luigi, monkeypatch, tmp_path: Path) -> None:
    from b2luigi.core.remote_target.webdav import ensure_requests_ca_bundle

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "")  # empty is unset; put back after the test
    b2luigi.set_setting("scratch_dir", str(tmp_path / "scratch"))
    first, extra = tmp_path / "first.pem", tmp_path / "certs"
    first.write_text("A")
    extra.mkdir()
    (extra / "b.0").write_text("B")
    assert ensure_requests_ca_bundle(str(first)) == first and os.environ["REQUESTS_CA_BUNDLE"] == str(first)
    merged = ensure_requests_ca_bundle(str(extra))
    assert merged.parent == tmp_path / "scratch" and os.environ["REQUESTS_CA_BUNDLE"] == str(merged)
    assert sorted(p.name for p in merged.iterdir()) == ["b.0", "first.pem"]
    with pytest.raises(FileNotFoundError):
        ensure_requests_ca_bundle(str(tmp_path / "missing.pem"))


def test_temporary_wrapper_pieces(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core.temporary_wrapper import EnsuredTemporaryScratchDirectory

    parent = tmp_path / "not" / "yet"
    with EnsuredTemporaryScratchDirectory(dir=str(parent)) as folder:
        assert Path(folder).parent == parent and Path(folder).is_dir()
    assert not Path(folder).exists()
    with pytest.raises(TypeError, match="keywords"):
        b2luigi.on_temporary_files(False)


def test_serialize_hashed_only_on_hashed_parameters(b2luigi) -> None:
    assert not hasattr(b2luigi.DictParameter(), "serialize_hashed")
    assert b2luigi.DictParameter(hashed=True).serialize_hashed({"a": 1}).startswith("hashed_")


def test_setting_file_iterator(b2luigi, monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text("{}")
    assert list(b2luigi._setting_file_iterator())[0] == str(tmp_path / "settings.json")
    monkeypatch.setenv("B2LUIGI_SETTINGS_JSON", "named.json")
    assert list(b2luigi._setting_file_iterator()) == ["named.json"]
