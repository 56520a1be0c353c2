"""The b2luigi profile: a workflow that imports ``b2luigi`` (the shim) gets b2luigi 1.3's defaults, files,
texts, exception types and exit statuses; ``import b2batch`` keeps b2batch's; explicit settings win over both.
(tests/dropins/b2luigi/test_b2luigi_differential.py compares whole scripts with the real b2luigi 1.3.0.)"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Workflow

import b2batch
from b2batch import settings
from b2batch.errors import OutputPathError, SettingError
from conftest import shim_env

SCRIPT = """
import os, sys
import {module} as b2luigi


class MyTask(b2luigi.Task):
    some_parameter = b2luigi.Parameter()

    def output(self):
        yield self.add_to_output("out.txt")

    @b2luigi.on_temporary_files
    def run(self):
        with open(self.get_output_file_name("out.txt"), "w") as f:
            f.write("done\\n")


class Broken(b2luigi.Task):
    def output(self):
        yield self.add_to_output("never.txt")

    def run(self):
        raise RuntimeError("broken on purpose")


if __name__ == "__main__":
    tasks = [MyTask(some_parameter="bla_blub")] + ([Broken()] if "--broken" in sys.argv else [])
    result = b2luigi.process(tasks, ignore_additional_command_line_args=True)
    print("process returned:", result)
    print("b2luigi's place:", os.path.exists("some_parameter=bla_blub/out.txt"))
"""


def script(folder: Path, module: str = "b2luigi", text: str = SCRIPT) -> Workflow:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "flow.py"
    path.write_text(textwrap.dedent(text).replace("{module}", module))
    return Workflow(folder=folder, script=path)


# --- the defaults -----------------------------------------------------------------------------------------

def test_a_b2luigi_script_writes_returns_and_exits_with_b2luigis_defaults(tmp_path: Path) -> None:
    flow = script(tmp_path / "flow")
    run = flow.run("--broken", env=shim_env())
    assert run.returncode == 0, run.stderr  # exit_on_failure false: process() returns, the script ends with 0
    assert "process returned: None" in run.stdout  # b2luigi's process() returns nothing
    assert "b2luigi's place: True" in run.stdout  # result_dir ".": the script's own check finds it
    assert (flow.folder / "some_parameter=bla_blub" / "out.txt").read_text() == "done\n"
    assert not (flow.folder / "results").exists()
    assert (flow.folder / "logs").is_dir() or not (flow.folder / "results").exists()
    assert "broken on purpose" in run.stderr and "b2batch summary" not in run.stderr  # luigi's summary only
    assert "===== Luigi Execution Summary =====" in run.stderr
    assert not list(flow.folder.rglob("b2batch-run-*"))  # no timeline or report that b2luigi would not write


def test_b2batchs_own_api_keeps_b2batchs_defaults(tmp_path: Path) -> None:
    flow = script(tmp_path / "flow", module="b2batch")
    run = flow.run("--broken", env=shim_env())
    assert run.returncode == 1, run.stderr  # b2batch's exit status after a failure
    assert (flow.folder / "results" / "some_parameter=bla_blub" / "out.txt").is_file()
    assert "b2batch summary" in run.stderr
    assert settings.active_profile() == "b2batch" and settings.default_of("result_dir") == "results"


def test_explicit_settings_win_over_the_profile(tmp_path: Path) -> None:
    flow = script(tmp_path / "flow")
    (flow.folder / "settings.json").write_text(json.dumps({"result_dir": "mine", "exit_on_failure": True}))
    run = flow.run("--broken", env=shim_env())
    assert run.returncode == 1, run.stderr
    assert (flow.folder / "mine" / "some_parameter=bla_blub" / "out.txt").is_file()


def test_the_profile_is_chosen_by_the_import_and_shown_by_b2batch_settings(b2luigi) -> None:
    assert settings.active_profile() == "b2luigi"
    assert b2batch.get_setting("result_dir") == "." and b2batch.get_setting("exit_on_failure") is False
    b2luigi.set_setting("result_dir", "here")
    assert b2batch.get_setting("result_dir") == "here"  # any explicit setting wins
    shown = subprocess.run([sys.executable, "-m", "b2batch", "settings", "--profile", "b2luigi"],
                           capture_output=True, text=True, check=True).stdout
    assert json.loads(shown)["result_dir"] == "." and json.loads(shown)["_profile"].startswith("profile b2luigi")
    plain = json.loads(subprocess.run([sys.executable, "-m", "b2batch", "settings"], capture_output=True, text=True,
                                      check=True).stdout)
    assert plain["result_dir"] == "results" and "_profile" not in plain



def test_a_scheduler_that_keeps_failing_fails_the_tasks_as_soon_as_b2luigis_retries_would(b2luigi) -> None:
    """b2luigi fails a task when its submit command fails, or after its 2 + 6 + 18 s of status retries; the run
    under the profile gives up after those 26 s, not after b2batch's 10 minutes."""
    from b2batch.settings.runconfig import run_config

    assert run_config().scheduler_unreachable_timeout == 26.0
    b2luigi.set_setting("scheduler_unreachable_timeout", 120)
    assert run_config().scheduler_unreachable_timeout == 120.0  # an explicit setting wins

# --- settings ----------------------------------------------------------------------------------------------

def test_get_setting_takes_b2luigis_arguments_and_raises_its_value_error(b2luigi) -> None:
    assert "deprecated_keys" in inspect.signature(b2luigi.get_setting).parameters

    class Old(b2luigi.Task):
        my_old = 5

    with pytest.warns(b2luigi.core.settings.DeprecatedSettingsWarning, match="my_old is deprecated"):
        assert b2luigi.get_setting("my_new", None, task=Old(), deprecated_keys=["my_old"]) == 5
    assert b2luigi.get_setting("nowhere", 3) == 3
    with pytest.raises(ValueError) as error:
        b2luigi.get_setting("nowhere")
    assert isinstance(error.value, SettingError) and type(error.value).__name__ == "ValueError"
    assert "'nowhere'" in str(error.value) and "set_setting" in str(error.value)  # b2batch's clear message


def test_a_settings_file_changed_while_running_is_seen_at_the_next_lookup(b2luigi, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[Path] = []
    read = settings._read_settings_file
    monkeypatch.setattr(settings, "_read_settings_file", lambda path: reads.append(path) or read(path))
    path = tmp_path / "settings.json"
    assert b2luigi.get_setting("colour", "none") == "none"
    path.write_text('{"colour": "red"}')
    assert b2luigi.get_setting("colour") == "red"  # a new file: at once
    for _ in range(100):
        assert b2luigi.get_setting("colour") == "red"
    assert reads == [path]  # unchanged: not parsed again
    before = path.stat()
    path.write_text('{"colour": "tan"}')  # the same size: its time stamp says it changed
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    assert b2luigi.get_setting("colour") == "tan"
    path.unlink()
    assert b2luigi.get_setting("colour", "gone") == "gone"


def test_a_workflows_own_settings_get_no_warning_under_the_profile(b2luigi, caplog) -> None:
    b2luigi.set_setting("my_analysis_cut", 3)
    assert b2luigi.get_setting("my_analysis_cut") == 3
    assert "is not a setting b2batch knows" not in caplog.text
    with pytest.raises(SettingError, match="batch_system"):  # a likely typo still stops the run
        b2luigi.set_setting("batch_sytem", "slurm")
        settings.check_settings()


# --- bad input, targets, helpers ------------------------------------------------------------------------

def test_bad_input_raises_b2luigis_type_with_b2batchs_message(b2luigi) -> None:
    class MyTask(b2luigi.Task):
        path = b2luigi.Parameter()

        def output(self):
            yield self.add_to_output("out.txt")

    with pytest.raises(ValueError) as error:
        MyTask(path="a/b").get_output_file_name("out.txt")
    assert type(error.value).__name__ == "ValueError" and isinstance(error.value, OutputPathError)
    assert "'path'" in str(error.value) and "hashed=True" in str(error.value)  # the fix
    settings.use_profile("b2batch")
    with pytest.raises(OutputPathError) as plain:
        MyTask(path="a/b").get_output_file_name("out.txt")
    assert type(plain.value) is OutputPathError


def test_tmp_name_and_temporary_files_as_b2luigi_names_them(b2luigi, tmp_path: Path) -> None:
    target = b2luigi.LocalTarget("some/folder/file.tar.gz")
    assert re.fullmatch(r"file-luigi-tmp-\d{10}\.tar\.gz", target.tmp_name) and target.tmp_name != target.tmp_name
    seen = []

    class Writes(b2luigi.Task):
        def output(self):
            yield self.add_to_output("data.root")

        @b2luigi.on_temporary_files
        def run(self):
            seen.append(self.get_output_file_name("data.root"))
            Path(seen[-1]).write_text("x")

    Writes().run()
    temporary = Path(seen[0])
    assert re.fullmatch(r"data-luigi-tmp-\d{10}\.root", temporary.name)
    assert temporary.parent.parent == Path(settings.default_of("scratch_dir"))  # b2luigi: the temporary folder
    assert not temporary.parent.exists() and (tmp_path / "data.root").read_text() == "x"
    with target.temporary_path() as path:
        Path(path).write_text("y")
    assert Path("some/folder/file.tar.gz").read_text() == "y"


def test_b2luigis_task_helpers_give_its_results(b2luigi, tmp_path: Path) -> None:
    class Producer(b2luigi.Task):
        def output(self):
            yield self.add_to_output("p.txt")

    @b2luigi.requires(Producer)
    class Consumer(b2luigi.Task):
        def output(self):
            yield self.add_to_output("c.txt")

    consumer, producer = Consumer(), Producer()
    assert inspect.isclass(b2luigi.requires) and inspect.isclass(b2luigi.inherits)
    [target] = consumer._get_input_targets("p.txt")
    assert isinstance(target, b2luigi.LocalTarget) and target.path == f"{tmp_path}/./p.txt"
    assert consumer.get_input_file_name() == f"{tmp_path}/./p.txt"  # b2luigi 1.3: the one input without a key
    assert producer._get_output_target("p.txt").path == producer.get_output_file_name("p.txt")
    assert producer._get_output_file_target("other.txt").path == f"{tmp_path}/./other.txt"
    assert producer._transform_io(producer.output()) == {"p.txt": [f"{tmp_path}/./p.txt"]}
    with pytest.raises(KeyError):
        consumer._get_input_targets("nope")
    assert Producer.grouped_param_names() == [] and not Producer.has_grouped_params()
    Path(producer.get_output_file_name("p.txt")).write_text("x")
    producer.remove_output()
    assert not (tmp_path / "p.txt").exists()


def test_hashed_parameters_are_hashed_as_b2luigi_hashes_them(b2luigi) -> None:
    class MyTask(b2luigi.Task):
        names = b2luigi.ListParameter(hashed=True)
        short = b2luigi.Parameter(hashed=True, hash_function=lambda value: f"len{len(value)}")
        plain = b2luigi.Parameter(hash_function=len)  # without hashed=True: the value itself, as in b2luigi

        def output(self):
            yield self.add_to_output("out.txt")

    path = MyTask(names=["a", "b"], short="abc", plain="xyz").get_output_file_name("out.txt")
    md5 = hashlib.md5(str(("a", "b")).encode()).hexdigest()
    assert path.endswith(f"/names=hashed_{md5}/short=len3/plain=xyz/out.txt")
    assert MyTask.names.serialize_hashed(("a", "b")) == f"hashed_{md5}"


# --- the command line and dispatch -----------------------------------------------------------------------

CHAIN = """
import b2luigi


class Raw(b2luigi.Task):
    n = b2luigi.IntParameter()

    def output(self):
        yield self.add_to_output("raw.txt")

    def run(self):
        open(self.get_output_file_name("raw.txt"), "w").write("raw")


class Plot(b2luigi.Task):
    def requires(self):
        return [Raw(n=0), Raw(n=1)]

    def output(self):
        yield self.add_to_output("plot.txt")

    def run(self):
        open(self.get_output_file_name("plot.txt"), "w").write("plot")


if __name__ == "__main__":
    b2luigi.process(Plot())
    print("after process")
"""


def test_dry_run_show_output_and_remove_say_and_do_what_b2luigi_does(tmp_path: Path) -> None:
    flow = script(tmp_path / "flow", text=CHAIN)
    dry = flow.run("--dry-run", env=shim_env())
    assert dry.returncode == 0, dry.stderr  # b2luigi 1.3.0: 0 also when tasks would run
    assert "Raw\n\tWould run Raw(n=0)\n\n\tWould run Raw(n=1)\n\n".replace("\t", " " * 8) in dry.stdout
    assert dry.stdout.rstrip().endswith("In total 3")
    assert flow.run(env=shim_env()).returncode == 0
    shown = flow.run("--show-output", env=shim_env() | {"COLUMNS": "300"})
    assert re.search(r"╭─+ Raw ─+╮", shown.stdout), shown.stdout  # a panel per class, as b2luigi's
    assert re.search(r"│\s+" + re.escape(f"{flow.folder}/n=0/raw.txt") + r"\s+✓", shown.stdout), shown.stdout
    removed = flow.run("--remove", "Raw", "-y", env=shim_env())
    assert removed.returncode == 0, removed.stderr
    assert "Removing... Plot()" in removed.stdout and "Removed outputs for 3 tasks." in removed.stdout  # cascade
    assert "after process" not in removed.stdout and not (flow.folder / "plot.txt").exists()  # nothing ran after
    assert not list(flow.folder.rglob("raw.txt"))


def test_process_twice_is_b2luigis_runtime_error(tmp_path: Path) -> None:
    flow = script(tmp_path / "flow", text=CHAIN.replace('    print("after process")', "    b2luigi.process(Plot())"))
    run = flow.run(env=shim_env())
    assert run.returncode == 1 and "RuntimeError: process() was called a second time" in run.stderr


DISPATCH = """
import os
import b2luigi


class MyTask(b2luigi.Task):
    env = {"MY_SECRET_VARIABLE": "42"}
    env_script = "setup.sh"

    def output(self):
        yield self.add_to_output("env.txt")

    @b2luigi.dispatch
    def run(self):
        with open(self.get_output_file_name("env.txt"), "w") as f:
            f.write(f"{os.environ.get('MY_SECRET_VARIABLE')} {os.environ.get('FROM_SETUP')} {os.getpid()}")


if __name__ == "__main__":
    print("steering", os.getpid())
    b2luigi.process(MyTask())
"""


def test_env_and_env_script_are_applied_to_a_dispatched_child(tmp_path: Path) -> None:
    flow = script(tmp_path / "flow", text=DISPATCH)
    (flow.folder / "setup.sh").write_text("export FROM_SETUP=sourced\nexport MY_SECRET_VARIABLE=overridden\n")
    run = flow.run(env=shim_env())
    assert run.returncode == 0, run.stderr
    secret, setup, pid = (flow.folder / "env.txt").read_text().split()
    assert (secret, setup) == ("42", "sourced")  # env_script sourced, then env on top (b2luigi's order)
    assert pid != run.stdout.split("steering ")[1].split()[0]  # in the child
    assert "MY_SECRET_VARIABLE" not in os.environ


def test_a_failing_env_script_is_a_clear_runtime_error(tmp_path: Path) -> None:
    flow = script(tmp_path / "flow", text=DISPATCH)
    (flow.folder / "setup.sh").write_text("echo no such thing >&2; exit 3\n")
    run = flow.run(env=shim_env())
    assert "RuntimeError: MyTask(): the setting env_script is 'setup.sh'" in run.stderr
    assert "exit status 3: no such thing" in run.stderr and not (flow.folder / "env.txt").exists()
