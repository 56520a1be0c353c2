"""The flags b2batch adds to every workflow script, checked by running a real script as a subprocess."""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import pytest
from conftest import tree

import b2batch
from b2batch.luigi_frontend import flags

FRESH = ["part.json"] * 3
TAB = " " * 8  # b2luigi prints a tab before each task; rich (which both use) expands it


def results(folder: Path) -> Path:
    return folder / "results" / "tag=none"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def steering_pid(stdout: str) -> int:
    return int(re.search(r"steering pid (\d+)", stdout).group(1))


@pytest.fixture
def flow(workflow):
    return workflow("flags.py")


@pytest.fixture
def done(flow):
    """The workflow, run once to completion."""
    run = flow.run()
    assert run.returncode == 0, run.stderr
    return flow


def test_plain_run_runs_everything(done) -> None:
    assert tree(done.folder / "results") == ["tag=none/n=0/part.json", "tag=none/n=1/part.json",
                                             "tag=none/n=2/part.json", "tag=none/total.json"]
    assert (done.folder / "task_files").exists()  # issue 44: a run without --batch runs local jobs (pilots)


# --- dry run ---------------------------------------------------------------------------------------------

def test_dry_run_lists_what_would_run_and_exits_1(flow) -> None:
    run = flow.run("--dry-run")
    assert run.returncode == 1, run.stderr
    for n in range(3):
        assert f"{TAB}Would run Part(tag=none, n={n})\n" in run.stdout
    assert f"Part\n{TAB}Would run Part(tag=none, n=0)\n" in run.stdout  # grouped by class, as b2luigi does
    assert f"Total\n{TAB}Would run Total(tag=none)\n" in run.stdout
    assert run.stdout.rstrip().endswith("In total 4")
    assert not (flow.folder / "results").exists()


def test_dry_run_of_a_complete_workflow_exits_0(done) -> None:
    run = done.run("--dry-run")
    assert run.returncode == 0, run.stderr
    assert "All tasks are finished!" in run.stdout
    assert "Would run" not in run.stdout


def test_dry_run_lists_only_what_is_missing(done) -> None:
    (results(done.folder) / "total.json").unlink()
    (results(done.folder) / "n=1" / "part.json").unlink()
    run = done.run("--dry-run")
    assert run.returncode == 1
    assert re.findall(r"Would run (.*)", run.stdout) == ["Part(tag=none, n=1)", "Total(tag=none)"]
    assert "In total 2" in run.stdout


# --- show output -------------------------------------------------------------------------------------------

def test_show_output_lists_every_task_with_its_files(flow) -> None:
    (results(flow.folder) / "n=2").mkdir(parents=True)
    (results(flow.folder) / "n=2" / "part.json").write_text("{}")
    run = flow.run("--show-output")
    assert run.returncode == 0, run.stderr
    base = results(flow.folder)
    assert f"Total(tag=none)\n    [missing] {base / 'total.json'}" in run.stdout
    assert f"Part(tag=none, n=0)\n    [missing] {base / 'n=0' / 'part.json'}" in run.stdout
    assert f"Part(tag=none, n=2)\n    [exists ] {base / 'n=2' / 'part.json'}" in run.stdout
    assert tree(flow.folder / "results") == ["tag=none/n=2/part.json"]  # nothing ran


# --- remove ------------------------------------------------------------------------------------------------

def test_remove_with_yes_removes_the_given_task_outputs_then_runs(done) -> None:
    before = {p: load(p)["pid"] for p in results(done.folder).rglob("*.json")}
    run = done.run("--remove", "--yes")
    assert run.returncode == 0, run.stderr
    assert f"Total\n{TAB}Removing... Total(tag=none)\n{TAB}call: remove_output()\n" in run.stdout
    assert "Removed outputs for 1 tasks." in run.stdout
    after = {p: load(p)["pid"] for p in results(done.folder).rglob("*.json")}
    assert after.keys() == before.keys()
    changed = sorted(p.name for p in after if after[p] != before[p])
    assert changed == ["total.json"]  # the requirements were kept and not run again


def test_remove_only_with_yes_removes_and_exits(done) -> None:
    run = done.run("--remove-only", "--yes")
    assert run.returncode == 0, run.stderr
    assert tree(done.folder / "results") == ["tag=none/n=0/part.json", "tag=none/n=1/part.json",
                                             "tag=none/n=2/part.json"]


def test_remove_without_yes_and_without_a_terminal_removes_nothing(done) -> None:
    for flag in ("--remove-only", "--remove"):
        run = done.run(flag)  # stdin is /dev/null
        assert run.returncode == 0, run.stderr
        assert "No tasks were removed" in run.stdout
        assert (results(done.folder) / "total.json").is_file()


def test_remove_after_answering_no_and_yes(done) -> None:
    refused = done.run("--remove-only", input="n\n")
    assert f"The following task outputs will be removed:\n{TAB}- Total\n" in refused.stdout
    assert "No tasks were removed" in refused.stdout
    assert (results(done.folder) / "total.json").exists()
    answered = done.run("--remove-only", input="y\n")
    assert answered.returncode == 0, answered.stderr
    assert "Removed outputs for 1 tasks." in answered.stdout
    assert not (results(done.folder) / "total.json").exists()


def test_remove_when_nothing_exists(flow) -> None:
    run = flow.run("--remove-only", "--yes")
    assert run.returncode == 0
    assert "Nothing to remove." in run.stdout


# --- how tasks run --------------------------------------------------------------------------------------------

def test_workers_run_tasks_at_once(flow) -> None:
    run = flow.run("--workers", "3", "--sleep", "1.5")
    assert run.returncode == 0, run.stderr
    parts = [load(p) for p in sorted(results(flow.folder).glob("n=*/part.json"))]
    assert max(p["start"] for p in parts) < min(p["end"] for p in parts), "the 3 parts did not overlap"
    assert len({p["pid"] for p in parts}) == 3


def test_without_workers_tasks_run_one_after_another(flow) -> None:
    run = flow.run("--sleep", "0.3")
    assert run.returncode == 0, run.stderr
    parts = sorted((load(p) for p in results(flow.folder).glob("n=*/part.json")), key=lambda p: p["start"])
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(parts))


def test_test_mode_runs_everything_in_this_process_with_output_shown(flow) -> None:
    run = flow.run("--test", "--batch", "--batch-system", "local", "--workers", "3")
    assert run.returncode == 0, run.stderr
    pid = steering_pid(run.stdout)
    assert {load(p)["pid"] for p in results(flow.folder).rglob("*.json")} == {pid}
    assert "part 1 says hello" in run.stdout
    assert "DEBUG" in run.stderr
    assert not (flow.folder / "task_files").exists()  # --test wins over --batch


def test_the_scripts_own_flags_are_left_to_it(flow) -> None:
    run = flow.run("--my-flag", "hello", "--show", "--dry-run")
    assert run.returncode == 1
    assert "Would run Total(tag=hello)" in run.stdout
    run = flow.run("--my-flag", "hello", "--show", "--count", "1")
    assert run.returncode == 0, run.stderr
    part = load(flow.folder / "results" / "tag=hello" / "n=0" / "part.json")
    assert part["show"] is True  # --show went to the script, not to b2batch's --show-output
    assert part["argv"] == ["--my-flag", "hello", "--show", "--count", "1"]


def test_batch_with_the_local_batch_system(flow) -> None:
    run = flow.run("--batch", "--batch-system", "local", "--workers", "3", "--my-flag", "batch")
    assert run.returncode == 0, run.stderr
    pid = steering_pid(run.stdout)
    records = [load(p) for p in (flow.folder / "results").rglob("*.json")]
    assert len(records) == 4
    assert pid not in {r["pid"] for r in records}
    for r in records:  # a job runs the script with the script's own flags only
        assert r["argv"] == ["--my-flag", "batch"]
    jobs = tree(flow.folder / "task_files")
    assert sum(name.endswith("/job.json") for name in jobs) == 4
    assert sum(name.endswith("/executable_wrapper.sh") for name in jobs) == 4
    assert "tag=batch/n=0/Part/stdout" in tree(flow.folder / "logs")
    assert "part 0 says hello" in (flow.folder / "logs" / "tag=batch" / "n=0" / "Part" / "stdout").read_text()


# --- the flag parser itself (in this process) ----------------------------------------------------------------

def test_parse_separates_b2batch_flags_from_the_scripts() -> None:
    args, rest = flags.parse(["--batch", "--my-flag", "x", "--workers", "4", "--show", "--dry", "pos"])
    assert args.batch is True and args.workers == 4
    assert args.show_output is None and args.dry_run is None  # no abbreviations of b2batch's flags
    assert rest == ["--my-flag", "x", "--show", "--dry", "pos"]


def test_unknown_arguments_can_be_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Nothing(b2batch.WrapperTask):
        pass

    monkeypatch.setattr(sys, "argv", ["script.py", "--unknown"])
    with pytest.raises(SystemExit, match="--unknown"):
        b2batch.process(Nothing(), ignore_additional_command_line_args=False)


def test_process_arguments_work_like_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Leaf(b2batch.Task):
        def output(self):
            yield self.add_to_output("leaf")

        def run(self):
            Path(self.get_output_file_name("leaf")).write_text("x")

    monkeypatch.setattr(sys, "argv", ["script.py"])
    with pytest.raises(SystemExit) as exit_status:
        b2batch.process(Leaf(), dry_run=True)
    assert exit_status.value.code == 1
    result = b2batch.process(Leaf(), log_level="WARNING")
    assert result.scheduling_succeeded
    assert (tmp_path / "results" / "leaf").read_text() == "x"
    with pytest.raises(SystemExit) as exit_status:
        b2batch.process([Leaf()], dry_run=True)
    assert exit_status.value.code == 0


def test_dry_run_calls_the_tasks_dry_run_and_names_missing_inputs(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    class Missing(b2batch.ExternalTask):
        def output(self):
            yield self.add_to_output("missing.dat")

    class Previewed(b2batch.Task):
        def requires(self):
            return Missing()

        def output(self):
            yield self.add_to_output("previewed")

        def dry_run(self):
            print("previewing what I would do")

    monkeypatch.setattr(sys, "argv", ["script.py", "--dry-run"])
    with pytest.raises(SystemExit) as exit_status:
        b2batch.process(Previewed())
    assert exit_status.value.code == 1
    out = capsys.readouterr().out
    assert f"Previewed\n{TAB}Would run Previewed()\n{TAB}call: dry_run()\npreviewing what I would do\n" in out
    assert "Missing input Missing(): an external task whose output does not exist" in out
    assert "In total 1" in out
