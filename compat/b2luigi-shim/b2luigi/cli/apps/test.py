"""``b2luigi test``: run one script as a task, here or (``--batch``, ``--batch-system``) as a job of a batch
system; its options, help texts and exit codes are b2luigi 1.3's (the work is :func:`..fast_test.test_task`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from b2luigi.cli.fast_test import test_task

__all__ = ["test_app"]

test_app = typer.Typer(name="test", help="Build a task from the given python script and execute it as b2luigi task.")

_SETTING_HELP = (
    "Override a b2luigi setting as key=value (JSON-aware, repeatable), e.g. --setting apptainer_image=my_image.sif "
    "(must be combined with --env-script). Applied only on the submission host and NEVER forwarded to the batch "
    "worker (unlike settings.json); use it for submission-side-only settings, and settings.json for anything (e.g. "
    "result_dir, log_dir) both sides must agree on. batch_system can be set this way (same as --batch-system); "
    "env_script cannot, since FastTask sets it as a class attribute which takes priority over --setting.")
_EXECUTABLE_HELP = (
    "Command used to run the script, split on shell rules (e.g. 'basf2', 'apptainer exec img.sif basf2'). "
    "Defaults to the current Python interpreter. Needed for basf2 steering files, whose -o/-i are handled by the "
    "basf2 wrapper rather than by the script. When set, -- is inserted before any extra arguments so the script's "
    "own args are not consumed by the wrapper. Unrelated to the 'executable' setting, which launches the b2luigi "
    "batch worker.")


@test_app.callback(invoke_without_command=True)
def test(
    script: Annotated[str, typer.Option("-s", help="Path to the Python script to execute as a b2luigi task.")],
    output: Annotated[str, typer.Option("-o", help="Output filename for the task target.")],
    input: Annotated[Optional[str],  # noqa: A002  (b2luigi's parameter name)
                     typer.Option("-i", help="Optional input filename; creates a prerequisite task.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Always re-run even if the output already exists.")] = False,
    batch: Annotated[bool, typer.Option("--batch",
                                        help="Submit task via batch system (batch_system='auto').")] = False,
    batch_system: Annotated[Optional[str], typer.Option(
        "--batch-system",
        help="Batch system to submit to (implies --batch). Use it to reach a system that cannot be auto-detected "
             "from PATH (gbasf2), or to choose between several that are installed. Equivalent to --setting "
             "batch_system=<name>.")] = None,
    env_script: Annotated[Optional[str], typer.Option(
        "--env-script",
        help="Path to an environment setup script, sourced by the batch submission wrapper. Only takes effect "
             "combined with --batch; a no-op otherwise.")] = None,
    setting: Annotated[Optional[list[str]], typer.Option("--setting", help=_SETTING_HELP)] = None,
    literal_path: Annotated[bool, typer.Option(
        "--literal-path/--no-literal-path",
        help="Write -o to the literal path given, exactly as -i already does (the default). Use --no-literal-path "
             "to nest the output under result_dir/param dirs via add_to_output() instead. No-op with --force (no "
             "output() is declared either way).")] = True,
    executable: Annotated[Optional[str], typer.Option("--executable", help=_EXECUTABLE_HELP)] = None,
    extra_args: Annotated[Optional[list[str]], typer.Argument(
        help="Extra arguments forwarded verbatim to the script subprocess.")] = None,
) -> None:
    """Build and run a one-off b2luigi task wrapping a Python script."""
    test_task(exec_script=script, output=output, input_file=input, force=force, batch=batch,
              extra_args=extra_args or [], env_script=env_script, settings=setting or [],
              literal_path=literal_path, executable=executable, batch_system=batch_system)
