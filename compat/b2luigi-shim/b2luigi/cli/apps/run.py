"""``b2luigi run NAME``: run a task class of the task file with the parameters of ``parameters.py`` (and
``--param``) through ``b2luigi.process``, which is b2batch's: ``--batch`` submits to b2batch's batch systems,
``--dry`` is the dry run. A config with generators runs every combination under one wrapper task."""

from typing import Annotated, Any, Optional

import typer

from b2luigi.cli.errors import CliUserError
from b2luigi.cli.options import Params, ParamsFile, TaskFile
from b2luigi.cli.utils import (build_task_index, check_param_applicability, cli_error_boundary,
                                               complete_task_names, expand_parameters, load_parameters,
                                               parse_kv_params, process_task_instance, resolve_defaults)
from b2batch import WrapperTask

run_app = typer.Typer(name="run", help="Run a task class from tasks.py",
                      context_settings={"allow_interspersed_args": True})


def _make_wrapper_task(task_class: type, param_dicts: list[dict[str, Any]]) -> Any:
    """A task ``<Name>Wrapper`` that requires ``task_class`` once per combination. It runs in this process
    (batch system ``local``, no apptainer image): it is made here and importable from nowhere, so no job could
    rebuild it; the tasks it requires go to the batch system as usual."""
    def requires(self: Any) -> list[Any]:
        return [task_class(**params) for params in param_dicts]

    wrapper = type(f"{task_class.__name__}Wrapper", (WrapperTask,),
                   {"requires": requires, "batch_system": "local", "apptainer_image": ""})
    return wrapper()


def run_task(task_class: type, task_filename: str = "tasks.py", parameters_file: str = "parameters.py",
             overrides: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Make the task(s) of ``task_class`` from the config (``overrides`` win) and run them."""
    config = {**load_parameters(parameters_file), **(overrides or {})}
    combinations = expand_parameters(config)
    if not combinations:
        raise CliUserError(f"Parameter expansion for '{task_class.__name__}' produced zero combinations. Check "
                           f"your ParameterGenerator or ZippedParameterGenerator values.")
    accepted = check_param_applicability(combinations[0], [task_class], frozenset(overrides or {}), named=True,
                                         target=task_class.__name__)
    combinations = [{k: v for k, v in params.items() if k in accepted} for params in combinations]
    task = task_class(**combinations[0]) if len(combinations) == 1 else _make_wrapper_task(task_class, combinations)
    # The files as given: a relative path is read in the job's working_dir.
    process_task_instance(task, task_file=task_filename, params_file=parameters_file, **kwargs)


@run_app.callback(invoke_without_command=True)
def run(
    classname: Annotated[str, typer.Argument(help="The name of the task class to run.",
                                             shell_complete=complete_task_names)],
    task_filename: TaskFile = None,
    parameter_filename: ParamsFile = None,
    params: Params = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry", "-d", help="Instead of running the task(s), write out which tasks will be executed.")] = False,
    batch: Annotated[bool, typer.Option(
        "--batch", "-b", help="Submit tasks to the configured batch system instead of running locally.")] = False,
    tui: Annotated[bool, typer.Option(
        "--tui", help=r"Show a live progress TUI while running tasks. Requires b2luigi\[tui].")] = False,
    scheduler_host: Annotated[Optional[str], typer.Option(
        "--scheduler-host", help="Host of a central luigi scheduler to connect to (instead of running locally)")] = None,
    scheduler_port: Annotated[Optional[int], typer.Option(
        "--scheduler-port", help="Port of a central luigi scheduler to connect to (instead of running locally)")] = None,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", help="Number of parallel luigi workers to use. Overrides the 'workers' setting.")] = None,
) -> None:
    """Run a task class from tasks.py."""
    with cli_error_boundary():
        files = resolve_defaults(task_filename, parameter_filename)
        task_class = build_task_index(files.task_file).resolve(classname, hint_cmd="b2luigi tasks")
        extra: dict[str, Any] = {} if workers is None else {"workers": workers}
        run_task(task_class=task_class, task_filename=files.task_file, parameters_file=files.params_file,
                 overrides=parse_kv_params(params or []), dry_run=dry_run, batch=batch, progress_tui=tui,
                 scheduler_host=scheduler_host, scheduler_port=scheduler_port, **extra)
