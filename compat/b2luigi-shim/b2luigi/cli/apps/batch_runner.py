"""``b2luigi batch-runner`` (hidden): run one task here as a job does. ``--classname`` with ``--param
name=value`` (the serialised values, rebuilt byte for byte) for a task of the task file; ``--script`` and
``--output-file`` for the task of ``b2luigi test``. b2batch's own jobs do not use it (they run
``python -m b2batch.luigi_frontend.task_on_node``); it is there for commands written in b2luigi's form."""

from typing import Annotated, List, Optional

import typer

from b2luigi.cli.options import ParamsFile, TaskFile
from b2luigi.cli.utils import (cli_error_boundary, load_parameters, load_task_class,
                                               process_task_instance, resolve_defaults, split_kv_params)

batch_runner_app = typer.Typer(name="batch-runner",
                               help="Execute a single task by task ID (used internally by the batch system).")


@batch_runner_app.callback(invoke_without_command=True)
def batch_runner(
    classname: Annotated[Optional[str], typer.Option("--classname", "-c", help="The task class name (task family).")] = None,
    task_filename: TaskFile = None,
    params_filename: ParamsFile = None,
    params: Annotated[Optional[List[str]], typer.Option(
        "--param", "-P", help="Serialised task parameter as key=value (repeatable). Generated automatically by the "
                              "batch submission; do not set by hand.")] = None,
    script: Annotated[Optional[str], typer.Option("--script", "-s", help="Path to the Python script to execute (test mode).")] = None,
    output_file: Annotated[Optional[str], typer.Option("--output-file", "-o", help="Output filename key (test mode).")] = None,
    input_file: Annotated[Optional[str], typer.Option("--input-file", "-i", help="Optional input filename key (test mode).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Always re-run even if output exists (test mode).")] = False,
    literal_path: Annotated[bool, typer.Option(
        "--literal-path/--no-literal-path", help="Write -o to the literal path given (test mode). The submission host "
                                                  "always sends one of the two flags explicitly; this default is never "
                                                  "relied on.")] = True,
    executable: Annotated[Optional[str], typer.Option(
        "--executable", help="Command used to run the script (test mode). Sent by the submission host only when it "
                             "was given explicitly; otherwise the worker uses its own interpreter.")] = None,
    extra_arg: Annotated[Optional[List[str]], typer.Option(
        "--extra-arg", help="Extra argument forwarded to the script subprocess (test mode, repeatable).")] = None,
) -> None:
    """Execute a specific task as a batch worker. Do not invoke this command manually: use ``b2luigi run`` or
    ``b2luigi test``."""
    if script is not None:
        if output_file is None:
            raise typer.BadParameter("--output-file is required in test mode", param_hint="'--output-file'")
        from b2luigi.cli.fast_test import _build_fast_req_task, _build_fast_task
        from b2batch import requires

        fast_task = _build_fast_task(exec_script=script, output=output_file, input_file=input_file,
                                     force=force, batch=False, extra_args=extra_arg or [],
                                     literal_path=literal_path, executable=executable)
        if input_file is not None:  # its input, so that get_input_file_name(input_file) answers
            fast_task = requires(_build_fast_req_task(input_file))(fast_task)
        process_task_instance(fast_task(), batch_runner=True)
    elif classname is not None:
        with cli_error_boundary():
            files = resolve_defaults(task_filename, params_filename)
            task_class = load_task_class(classname, files.task_file)
            load_parameters(files.params_file)  # its set_setting() calls apply here as on the submitting host
        process_task_instance(task_class.from_str_params(split_kv_params(params or [])), batch_runner=True)
    else:
        raise typer.BadParameter("Provide either --classname (normal task) or --script (test mode).",
                                 param_hint="'--classname' / '--script'")
