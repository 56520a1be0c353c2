"""The command line of a workflow script: the script's own flags stay its own, a flag close to one of b2batch's
stops with a "did you mean" (checked after the script's argparse took its flags), any other unknown flag is
warned about unless ``ignore_additional_command_line_args`` says to ignore it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import clean_env

SCRIPT = '''
import argparse
import b2batch

class Nothing(b2batch.WrapperTask):
    pass

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=1)  # close to b2batch's --batch, but the script's
    args, _ = parser.parse_known_args()
    print("batches", args.batches)
    b2batch.process(Nothing(){extra})

if __name__ == "__main__":
    main()
'''


def run(folder: Path, *args: str, extra: str = "") -> subprocess.CompletedProcess[str]:
    (folder / "own.py").write_text(SCRIPT.replace("{extra}", extra))
    return subprocess.run([sys.executable, "own.py", *args], cwd=folder, env=clean_env(), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_the_scripts_own_flag_close_to_one_of_b2batchs_is_left_to_it_without_a_warning(tmp_path: Path) -> None:
    done = run(tmp_path, "--batches", "3")
    assert done.returncode == 0, done.stderr
    assert "batches 3" in done.stdout
    assert "Did you mean" not in done.stderr and "WARNING: the flag" not in done.stderr, done.stderr


def test_an_unknown_flag_nobody_took_is_warned_about_once(tmp_path: Path) -> None:
    done = run(tmp_path, "--verbose-mode", "--colour=red")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING: the flag")]
    assert len(warnings) == 1 and "--verbose-mode, --colour" in warnings[0], done.stderr
    assert "ignore_additional_command_line_args=True" in warnings[0]


@pytest.mark.parametrize(("value", "code"), [("True", 0), ("False", 1)])
def test_ignore_additional_command_line_args_silences_or_refuses(tmp_path: Path, value: str, code: int) -> None:
    done = run(tmp_path, "--verbose-mode", extra=f", ignore_additional_command_line_args={value}")
    assert done.returncode == code, done.stderr
    assert "WARNING: the flag" not in done.stderr
    assert ("Unknown command-line arguments: --verbose-mode" in done.stderr) == (value == "False")


def test_a_typo_of_a_b2batch_flag_still_stops_beside_the_scripts_own_flags(tmp_path: Path) -> None:
    done = run(tmp_path, "--batches", "2", "--dryrun")
    assert done.returncode == 1
    assert "unknown flag '--dryrun'. Did you mean '--dry-run'?" in done.stderr


def test_the_readme_example_runs_from_the_repository_root_on_the_batch_system_of_its_settings(
        tmp_path: Path) -> None:
    import shutil

    example = Path(__file__).resolve().parents[2] / "examples" / "average"
    root = tmp_path / "repository"
    shutil.copytree(example, root / "examples" / "average",
                    ignore=shutil.ignore_patterns("logs", "results", "task_files", "__pycache__"))
    done = subprocess.run([sys.executable, "examples/average/workflow.py", "--batch", "--workers", "4"], cwd=root,
                          env=clean_env(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = done.stderr[done.stderr.index("===== b2batch summary ====="):]
    assert "RandomNumbers" in summary and " local " in summary, summary  # its settings.json: batch_system local
    assert (root / "examples" / "average" / "results").is_dir() and not (root / "results").exists()
