"""``b2luigi.core.executable.create_executable_wrapper`` through the shim writes b2luigi 1.3's
``executable_wrapper.sh`` (its lines, in its order) into the task's file folder, with every value of the
settings one quoted shell word: a working directory, environment script or ``env`` value cannot add a command
(b2luigi writes the first two unquoted). With ``apptainer_image`` the container's command stays one word (the
guard of b2luigi's own ``TestApptainerWrapperQuoting``)."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def task_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The task file the wrapper's command names (``$B2LUIGI_TASK_FILE``)."""
    script = tmp_path / "flow.py"
    script.write_text("")
    monkeypatch.setenv("B2LUIGI_TASK_FILE", str(script))
    return script


def _task(b2luigi):
    class MyTask(b2luigi.Task):
        value = b2luigi.Parameter()

        def output(self):
            yield self.add_to_output("a.txt")

    return MyTask(value="x && touch pwned")


def test_the_wrapper_has_b2luigis_lines_in_its_order(b2luigi, tmp_path: Path, task_file: Path) -> None:
    from b2luigi.core.executable import create_executable_wrapper
    from b2luigi.core.utils import get_task_file_dir

    task = _task(b2luigi)
    b2luigi.set_setting("env_script", "setup.sh")
    b2luigi.set_setting("env", {"MY_VAR": "a b", "OTHER": "1"})
    wrapper = Path(create_executable_wrapper(task))
    assert wrapper == Path(get_task_file_dir(task), "executable_wrapper.sh")
    assert wrapper.stat().st_mode & stat.S_IXUSR
    assert wrapper.read_text().splitlines() == [
        "#!/bin/bash", "set -e", f"cd {tmp_path}", "echo 'Working in the folder:'; pwd",
        "echo 'Setting up the environment'", "source setup.sh", "export MY_VAR='a b'", "export OTHER='1'",
        "echo 'Current environment:'; env", "echo 'Will now execute the program'",
        f"exec {sys.executable} flow.py --batch-runner --task-id {task.task_id}"]


def test_no_setting_can_add_a_command_to_the_wrapper(b2luigi, weird_tmp_path: Path, task_file: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from b2luigi.core import executable

    folder = weird_tmp_path  # "a'; echo foo"
    (folder / "env $(touch pwned1).sh").write_text("export FROM_SCRIPT=yes\n")
    evil = "it's $(touch pwned2) `touch pwned3`; touch pwned4 \\'\n'; touch pwned5"
    b2luigi.set_setting("working_dir", str(folder))
    b2luigi.set_setting("env_script", "env $(touch pwned1).sh")
    b2luigi.set_setting("env", {"MY_VAR": evil})
    monkeypatch.setattr(executable, "create_cmd_from_task", lambda task: ["printenv", "MY_VAR", "FROM_SCRIPT"])
    wrapper = executable.create_executable_wrapper(_task(b2luigi))
    done = subprocess.run([wrapper], capture_output=True, text=True, cwd=task_file.parent, timeout=30)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[1] == str(folder)  # pwd, after "Working in the folder:"
    assert done.stdout.endswith(f"{evil}\nyes\n")  # the value arrives whole, the script was sourced
    assert not list(folder.parent.rglob("pwned*")) and not list(Path.cwd().glob("pwned*"))


def test_names_and_shells_that_cannot_be_written_safely_are_refused(b2luigi, task_file: Path) -> None:
    from b2luigi.core.executable import create_executable_wrapper

    b2luigi.set_setting("env", {"A; touch pwned": "1"})
    with pytest.raises(ValueError, match="environment variable"):
        create_executable_wrapper(_task(b2luigi))
    b2luigi.set_setting("env", {})
    b2luigi.set_setting("shell", "bash\ntouch pwned")
    with pytest.raises(ValueError, match="shell"):
        create_executable_wrapper(_task(b2luigi))


def test_apptainer_line_of_the_wrapper_keeps_the_payload_one_word(b2luigi, tmp_path: Path, task_file: Path) -> None:
    from b2luigi.core.executable import create_executable_wrapper

    (tmp_path / "env dir").mkdir()
    setup = tmp_path / "env dir" / "setup.sh"
    setup.write_text("export A=1\n")
    b2luigi.set_setting("apptainer_image", "/img.sif")
    b2luigi.set_setting("apptainer_cmd", "apptainer")
    b2luigi.set_setting("apptainer_mounts", ["/data"])  # b2luigi 1.3 also wants it set
    b2luigi.set_setting("apptainer_mount_defaults", False)
    b2luigi.set_setting("env_script", str(setup))
    task = _task(b2luigi)
    lines = Path(create_executable_wrapper(task)).read_text().splitlines()
    assert not any(line.startswith("source ") for line in lines)  # the container's shell sources it
    assert lines[-2] == "echo 'Will now execute the program with the image /img.sif'"
    argv = shlex.split(lines[-1])
    assert argv[:5] == ["apptainer", "exec", "--bind", "/data", "/img.sif"] and "&&" not in argv
    payload = argv[argv.index("-c") + 1]
    assert len(argv) == argv.index("-c") + 2
    assert payload == (f"source {shlex.quote(str(setup))} && {sys.executable} flow.py --batch-runner --task-id "
                       f"{task.task_id}")


def test_patched_helpers_of_the_module_are_used(b2luigi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As b2luigi's own tests use it: the helpers are looked up as names of the module."""
    from b2luigi.core import executable

    monkeypatch.setattr(executable, "get_setting", lambda key, task=None, default=None, deprecated_keys=None:
                        {"working_dir": "/work"}.get(key, default))
    monkeypatch.setattr(executable, "get_task_file_dir", lambda task: str(tmp_path / "files"))
    monkeypatch.setattr(executable, "create_cmd_from_task", lambda task: ["b2luigi", "batch-runner"])
    path = executable.create_executable_wrapper(task=None)
    assert path == os.path.join(tmp_path, "files", "executable_wrapper.sh")
    lines = Path(path).read_text().splitlines()
    assert (lines[2], lines[-1]) == ("cd /work", "exec b2luigi batch-runner")
