"""Values written into the job wrapper are quoted in one place: nothing in them is ever executed, and they
arrive byte-exact in the job. Checked by running the real rendered wrapper, whose executable is a tiny
script that records its arguments, environment and working directory."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import clean_env, tree
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import b2batch
from b2batch.settings.resolve import resolve_job_config
from b2batch.luigi_frontend.jobs import task_wrapper
from b2batch.jobscript import wrapper
from b2batch.errors import SettingError
from b2batch.engine.files import JobFiles
from b2batch.engine import Run
from b2batch.luigi_frontend.jobs import RunContext, TaskJobs
from b2batch.luigi_frontend.task_outputs import task_files

CANARY = "CANARY"  # a relative canary: created in whatever folder a stray `touch` runs in

RECORDER = f"""#!{sys.executable} -I
import json, os, sys
from pathlib import Path
record = {{
    "argv": [os.fsencode(a).hex() for a in sys.argv[1:]],
    "env": {{k.hex(): v.hex() for k, v in os.environb.items()}},
    "cwd": os.fsencode(os.getcwd()).hex(),
}}
Path(__file__).with_name("record.json").write_text(json.dumps(record))
"""


class Quoted(b2batch.Task):
    """Its parameter becomes part of the log folder, which the wrapper names."""

    value = b2batch.Parameter()
    number = b2batch.IntParameter(default=1)


def injections(canary: str) -> st.SearchStrategy[str]:
    return st.sampled_from([
        f"$(touch {canary})", f"`touch {canary}`", f"; touch {canary}", f"'; touch {canary}; '",
        f"\"; touch {canary}; \"", f"\ntouch {canary}\n", f"' && touch {canary} #", f"\\'$(touch {canary})",
        f"|touch {canary}", f"&touch {canary}&", "$((6*7))", "${HOME}", "$HOME", "$$", "\\", "'", '"', "!", "*",
        "~", "#", "\n", "\t", " ", "-", "--x", "é", "日本", "\U0001f600", "\r",
    ])


def mixed(canary: str, max_parts: int = 4) -> st.SearchStrategy[str]:
    text = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=6)
    return st.lists(st.one_of(text, injections(canary)), max_size=max_parts).map("".join)


def component() -> st.SearchStrategy[str]:
    """One folder name: no slash or NUL, not empty, not '.' or '..', short enough for any file system."""
    return mixed(CANARY, 3).map(lambda s: s.replace("/", "_")).filter(
        lambda s: s not in ("", ".", "..") and len(s.encode()) < 120)


def env_values(canary: str) -> st.SearchStrategy[dict[str, str]]:
    """Variables with a prefix, so that none of them changes how the shell or Python behave."""
    names = st.from_regex(r"[A-Za-z0-9_]{0,10}", fullmatch=True).map(lambda n: f"B2T_{n}")
    return st.dictionaries(names, mixed(canary), max_size=4)


def run_wrapper(base: Path, *, value: str, number: int, env: dict[str, str], args: list[str],
                folders: dict[str, str], env_script_value: str) -> tuple[dict, JobFiles]:
    """Render the wrapper of ``Quoted(value, number)`` with these settings, run it; what the job saw."""
    recorder_dir = base / "recorder"
    recorder_dir.mkdir()
    recorder = recorder_dir / "record.py"
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    for setting, name in folders.items():
        (base / setting).mkdir()
        b2batch.set_setting(setting, str(base / setting / name))
    Path(b2batch.get_setting("working_dir")).mkdir()
    env_script = base / "env_script" / folders["log_dir"]
    env_script.parent.mkdir()
    env_script.write_text(f"export FROM_ENV_SCRIPT={shlex.quote(env_script_value)}\n")
    b2batch.set_setting("env_script", str(env_script))
    b2batch.set_setting("env", env)
    b2batch.set_setting("executable", [str(recorder), *args])

    task = Quoted(value=value, number=number)
    jobs = TaskJobs(Run(), RunContext())
    job = jobs.make(task)
    jobs.write_files(job)
    job_files = job.files
    done = subprocess.run([str(job_files.wrapper)], check=False, cwd=base, env=clean_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, (done, job_files.stderr.read_bytes())
    return json.loads((recorder_dir / "record.json").read_text()), job_files


def check_job(base: Path, record: dict, job_files: JobFiles, env: dict[str, str], args: list[str],
              env_script_value: str, canary: Path) -> None:
    assert [bytes.fromhex(a) for a in record["argv"]] == \
        [os.fsencode(a) for a in (*args, str(wrapper.ENTRY_POINT), str(job_files.spec))]
    job_env = {bytes.fromhex(k): bytes.fromhex(v) for k, v in record["env"].items()}
    for name, value in env.items():
        assert job_env[name.encode()] == value.encode(), name
    assert job_env[b"FROM_ENV_SCRIPT"] == env_script_value.encode()
    assert bytes.fromhex(record["cwd"]) == os.fsencode(os.path.realpath(b2batch.get_setting("working_dir")))
    assert job_files.read_exit_code() == 0
    assert job_files.stderr.read_bytes() == b"", "the wrapper reported errors: something was run that should not be"
    assert "job of task" in job_files.stdout.read_text(errors="replace")
    assert not canary.exists()
    strays = [p for folder in {base, Path.cwd()} for p in folder.rglob(CANARY)]  # the shell ran in base
    assert not strays


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)
def test_nothing_in_values_is_executed_and_values_arrive_exactly(tmp_path: Path, data: st.DataObject | None) -> None:
    base = Path(tempfile.mkdtemp(prefix="ex ' $(x) ", dir=tmp_path))
    canary = tmp_path / "canary-made"
    if data is None:  # the explicit example: every kind of hostile value at once
        value, number = f"'; touch {CANARY}; echo \"$(touch {CANARY})\n`touch {CANARY}`", 7
        env = {"A": f"$(touch {canary})", "B": f"'\"; touch {canary}\n\\", "EMPTY": "", "U": "日本\U0001f600",
               "IFS": "; touch {canary};"}
        args = [f"`touch {canary}`", "", "two words", "-c", "'"]
        folders = {s: f"{s} '$(touch {CANARY})'; `touch {CANARY}`\n#" for s in ("log_dir", "task_file_dir",
                                                                              "working_dir")}
        env_script_value = f"$(touch {canary})'"
    else:
        value = data.draw(component(), "value")
        number = data.draw(st.integers(-10**6, 10**6), "number")
        env = data.draw(env_values(str(canary)), "env")
        args = data.draw(st.lists(mixed(str(canary)), max_size=3), "args")
        folders = {s: data.draw(component(), s) for s in ("log_dir", "task_file_dir", "working_dir")}
        env_script_value = data.draw(mixed(str(canary)), "env_script_value")
    try:
        record, job_files = run_wrapper(base, value=value, number=number, env=env, args=args, folders=folders,
                                        env_script_value=env_script_value)
        check_job(base, record, job_files, env, args, env_script_value, canary)
    finally:
        for key in ("log_dir", "task_file_dir", "working_dir", "env_script", "env", "executable"):
            b2batch.clear_setting(key)


# --- the quote filter and the checks of settings ---------------------------------------------------------------

@given(st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",))))
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_quote_is_one_shell_word(value: str) -> None:
    assert shlex.split(wrapper.quote(value)) == [value]


def test_rendered_wrapper_quotes_each_value_once(tmp_path: Path) -> None:
    b2batch.set_setting("env", {"X": "it's"})
    b2batch.set_setting("working_dir", str(tmp_path / "w d"))
    task = Quoted(value="v")
    job_files = task_files(task)
    text = task_wrapper(task, job_files)
    assert "export X='it'\"'\"'s'\n" in text
    assert f"cd {shlex.quote(str(tmp_path / 'w d'))} ||" in text
    assert f"exec >>{shlex.quote(str(job_files.stdout))} 2>>{shlex.quote(str(job_files.stderr))}\n" in text
    assert "''" not in text.replace("'\"'\"'", "")  # no doubled quoting around quoted values


@pytest.mark.parametrize("env", [{"1ABC": "x"}, {"A-B": "x"}, {"A B": "x"}, {"A;touch x": "x"}, {"": "x"}])
def test_invalid_environment_variable_names_are_refused(env: dict[str, str]) -> None:
    b2batch.set_setting("env", env)
    with pytest.raises(SettingError, match="'env'"):
        wrapper.env_of(Quoted(value="v"), resolve_job_config(Quoted(value="v")))


def test_env_must_be_a_dict() -> None:
    b2batch.set_setting("env", ["A=1"])
    with pytest.raises(SettingError, match="must be a dict"):
        wrapper.env_of(Quoted(value="v"), resolve_job_config(Quoted(value="v")))


@pytest.mark.parametrize("executable", [[], "", [1, 2], {"python": 1}])
def test_unusable_executable_is_refused_naming_the_setting(executable: object) -> None:
    b2batch.set_setting("executable", executable)
    with pytest.raises(SettingError, match="'executable'"):
        wrapper.executable_of(Quoted(value="v"), resolve_job_config(Quoted(value="v")))


def test_executable_string_is_split_like_a_shell_does() -> None:
    b2batch.set_setting("executable", "/opt/venv/bin/python3 -u")
    assert wrapper.executable_of(Quoted(value="v"), resolve_job_config(Quoted(value="v"))) == ["/opt/venv/bin/python3", "-u"]
    b2batch.set_setting("executable", "'/opt/my python/bin/python3' -u")
    assert wrapper.executable_of(Quoted(value="v"), resolve_job_config(Quoted(value="v"))) == ["/opt/my python/bin/python3", "-u"]


def test_missing_env_script_is_a_clear_error(tmp_path: Path) -> None:
    b2batch.set_setting("env_script", "nowhere/setup.sh")
    with pytest.raises(SettingError, match="env_script.*nowhere/setup.sh"):
        wrapper.env_script_of(Quoted(value="v"), resolve_job_config(Quoted(value="v")))


# --- a whole workflow in a folder named to break shells ---------------------------------------------------------

def test_batch_workflow_in_a_weird_folder(workflow, weird_tmp_path: Path, tmp_path: Path) -> None:
    flow = workflow("flags.py", folder=weird_tmp_path / "`touch CANARY` $(touch CANARY)")
    canary = tmp_path / "canary-made"
    (flow.folder / "settings.json").write_text(json.dumps({
        "env": {"HOSTILE": f"'; touch {canary}; echo foo '"},
        "env_script": "setup $(touch CANARY).sh",
    }))
    (flow.folder / "setup $(touch CANARY).sh").write_text("export FROM_SETUP='a b'\n")
    run = flow.run("--batch", "--batch-system", "local", "--count", "1", "--my-flag", "it's $(touch CANARY)")
    assert run.returncode == 0, run.stderr
    part = flow.folder / "results" / "tag=it's $(touch CANARY)" / "n=0" / "part.json"
    assert json.loads(part.read_text())["argv"] == ["--count", "1", "--my-flag", "it's $(touch CANARY)"]
    logs = [p for p in (flow.folder / "logs").rglob("*") if p.name in ("stdout", "stderr")]
    assert len(logs) == 4
    for log in logs:
        assert "foo\n" not in log.read_text()
        if log.name == "stderr":
            assert "command not found" not in log.read_text() and "syntax error" not in log.read_text()
    assert not canary.exists()
    assert not [p for p in tmp_path.rglob(CANARY)], tree(tmp_path)
    assert "foo\n" not in run.stdout
