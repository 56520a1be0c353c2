"""Every setting b2batch knows, declared once: its name, default, meaning and the values it takes; the
defaults profiles; b2luigi's former names of settings. ``settings.json.example`` and the docs' settings
reference are generated from :data:`SETTINGS` (``python -m b2batch.settings``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Kind:
    """What values a setting takes: a check that converts an acceptable value (e.g. the string "2" of a
    whole number) and refuses others with what was expected."""

    def __init__(self, expects: str, accept: Callable[[Any], Any]) -> None:
        self.expects = expects
        self.accept = accept

    def __call__(self, value: Any) -> Any:
        return self.accept(value)


def _number(integer: bool = False, minimum: float | None = None, above: float | None = None,
            none: bool = False) -> Kind:
    what = "a whole number" if integer else "a number"
    if minimum is not None:
        what += f" of at least {minimum:g}"
    if above is not None:
        what += f" above {above:g}"
    if none:
        what += ", or null for none"

    def accept(value: Any) -> Any:
        if value is None and none:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        number = (int(value) if integer else float(value)) if isinstance(value, str) else value
        if integer and number != int(number):
            raise ValueError
        if (minimum is not None and number < minimum) or (above is not None and number <= above):
            raise ValueError
        return int(number) if integer else number

    return Kind(what, accept)


def _of(types: tuple[type, ...], expects: str, none: bool = True) -> Kind:
    def accept(value: Any) -> Any:
        if (value is None and none) or isinstance(value, types):
            return value
        raise ValueError

    return Kind(expects + (", or null" if none else ""), accept)


def _choice(*values: str) -> Kind:
    def accept(value: Any) -> Any:
        if value in values:
            return value
        raise ValueError

    return Kind("one of " + ", ".join(values), accept)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError


def _checked(value: Any, parser: str) -> Any:
    """``value`` if the escalation's ``parser`` reads it (null passes)."""
    if value in (None, ""):
        return None
    from b2batch.engine import escalation

    getattr(escalation, parser)(value)  # raises ValueError
    return value


PATH = _of((str, os.PathLike), "a path (a string)")
FOLDER = _of((str, os.PathLike), "a path (a string)", none=False)
TEXT = _of((str,), "a string")
DICT = _of((dict,), "a dict (a JSON object)", none=False)
LIST = _of((list, tuple), "a list", none=False)
FLAG = Kind("true or false", _flag)
SECONDS = _number(minimum=0)


@dataclass(frozen=True)
class Setting:
    """One declared setting: its name, default, what it means, and what values it takes."""

    name: str
    default: Any
    help: str
    required: bool = False
    kind: Kind | None = None


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        # Where things go.
        Setting("result_dir", "results", "Folder of the task outputs; relative paths are relative to the "
                "workflow script's folder.", kind=FOLDER),
        Setting("log_dir", "logs", "Folder of the per-task job logs (stdout, stderr).", kind=FOLDER),
        Setting("task_file_dir", "task_files", "Folder of the job files: wrappers, submit files, exit-code "
                "and result files, the run journal.", kind=FOLDER),
        Setting("job_folder_layout", "b2batch", "Where in task_file_dir a task's job folder is: b2batch "
                "(<TaskFamily>/<task_id>/) or b2luigi (<parameters, hidden ones too>/<TaskFamily>/, as b2luigi 1.3 "
                "puts its task files; the b2luigi profile's).", kind=_choice("b2batch", "b2luigi")),
        Setting("scratch_dir", None, "Folder for temporary files of on_temporary_files(); default: next to "
                "each output.", kind=PATH),
        Setting("parameter_separator", "=", "Text between a parameter's name and value in output paths.", kind=TEXT),
        Setting("use_parameter_name_in_output", True, "Put 'name=value' (true) or only the value (false) "
                "into output paths.", kind=FLAG),
        # How jobs run.
        Setting("batch_system", "auto", "Where --batch sends a task: local, slurm, sge, htcondor, lsf, auto "
                "(the first of bsub, condor_submit, sbatch, qsub found on PATH, else local), or a plugin's name."),
        Setting("env_script", None, "A shell script sourced by every job before the task runs.", kind=PATH),
        Setting("env", {}, "Environment variables exported by every job: a dict of name to value.", kind=DICT),
        Setting("executable", None, "The command that runs the workflow script in a job, as a list or a "
                "string; default: the Python interpreter running the workflow."),
        Setting("working_dir", None, "Folder a job changes into before it runs; default: the workflow "
                "script's folder.", kind=PATH),
        Setting("job_name", None, "Name of the task's job on the batch system; default: the task family.", kind=TEXT),
        Setting("shell", "bash", "Shell that runs the job wrapper.", kind=TEXT),
        Setting("workers", 1, "luigi workers of process(): tasks (or jobs) that run at once (b2luigi's setting; "
                "--workers and process(workers=...) win).", kind=_number(integer=True, minimum=1)),
        Setting("local_slots", None, "Jobs the local batch system runs at once; 0 or null: the number of "
                "CPUs.", kind=_number(integer=True, minimum=0, none=True)),
        Setting("local_start", "auto", "How the local batch system starts a job whose wrapper would only set "
                "the environment and run this Python on the job: fork (from a copy of the steering process made as "
                "the run starts, with b2batch imported: a pilot runs its first task within milliseconds), wrapper "
                "(the job's wrapper, a fresh interpreter, as a cluster node runs it), auto (fork if the steering "
                "process has no other thread when the run starts, else wrapper; the jobs of luigi tasks always start "
                "from their wrappers; docs/local.md).",
                kind=_choice("auto", "fork", "wrapper")),
        Setting("poll_interval", 1.0, "Seconds between status queries of a batch system at the start of a "
                "run.", kind=SECONDS),
        Setting("max_poll_interval", 30.0, "Longest wait between status queries while nothing changes.",
                kind=_number(above=0)),
        Setting("retry_memory_factor", None, "A job killed for using more memory than it asked for goes again "
                "asking for this many times more (e.g. 2), in its batch system's own syntax, up to max_retry_memory "
                "and within max_resubmissions; null: off (docs/policies.md).", kind=_number(above=1, none=True)),
        Setting("retry_time_factor", None, "A job killed at its time limit goes again asking for this many times "
                "more time, up to max_retry_time and within max_resubmissions; null: off.",
                kind=_number(above=1, none=True)),
        Setting("max_retry_memory", None, "The most memory an escalated job asks for: MB, or a size such as "
                "\"64G\"; null: no bound.", kind=Kind("a memory size such as 64G or 4000 (MB), or null",
                                                        lambda v: _checked(v, "megabytes"))),
        Setting("max_retry_time", None, "The most run time an escalated job asks for: seconds, or \"2d\", "
                "\"48:00:00\"; null: no bound.", kind=Kind("a duration such as 3600, 2h or 48:00:00, or null",
                                                           lambda v: _checked(v, "seconds"))),
        Setting("max_node_failures", 3, "Jobs that fail on one node for node reasons (node failure, set-up failure, "
                "a lost file system) after which the run's later jobs avoid that node, while other nodes work; 0: "
                "never.", kind=_number(integer=True, minimum=0)),
        Setting("max_resubmissions", 2, "How often a job that failed for a scheduler-side reason (node "
                "failure, preemption, a held or lost job) is submitted again.", kind=_number(integer=True, minimum=0)),
        Setting("resubmit_failed_tasks", False, "Also submit again jobs whose task itself failed (up to "
                "max_resubmissions times).", kind=FLAG),
        Setting("max_task_failures", 3, "A task whose jobs failed this many times in a row, counted across runs in "
                "its job folder, is not submitted again (a poison task: the run marks it failed without a job) until "
                "the workflow runs with --retry-failed or `b2batch retry` resets it; null: no limit (b2luigi "
                "profile: null).", kind=_number(integer=True, minimum=1, none=True)),
        Setting("max_checkpoint_requeues", 5, "How often a job whose task saved a checkpoint on the batch system's "
                "warning (walltime, preemption) is submitted again to resume; these are no failures.",
                kind=_number(integer=True, minimum=0)),
        Setting("checkpoint_warning", 120, "Seconds before a job's walltime at which the batch system warns a task "
                "that defines checkpoint() (Slurm --signal=B:USR1@N, LSF -wa USR1 -wt; HTCondor and SGE warn on "
                "removal and preemption).", kind=_number(integer=True, minimum=1)),
        Setting("exit_on_failure", True, "A run in which a task failed ends the script with exit status 1 "
                "(false: process() returns luigi's result and the script goes on, as in b2luigi; process()'s "
                "argument exit_on_failure wins).", kind=FLAG),
        Setting("b2luigi_hashing", False, "Parameters with hashed=True stand in paths for hashed_ and the md5 of "
                "str(value), and hash_function applies only with hashed=True, as in b2luigi 1.3 (false: the md5 of "
                "the serialized value, and hash_function implies hashed; the same for strings and numbers). "
                "b2luigi profile: true.", kind=FLAG),
        Setting("b2luigi_texts", False, "--dry-run, --show-output, --remove and --remove-only as in b2luigi 1.3: "
                "--dry-run counts external tasks too and exits with 0, --remove CLASS also removes what needs its "
                "tasks, and nothing runs after a removal (b2luigi profile: true).", kind=FLAG),
        Setting("local_runs_send_jobs", False, "Without --batch, a task whose class or instance names its own "
                "batch_system (other than local) still runs as a job there, the others in the script's process, "
                "as in b2luigi (b2luigi profile: true).", kind=FLAG),
        Setting("local_runs_on_engine", True, "Without --batch (and without --test or a central scheduler), the "
                "tasks run as jobs of the local batch system through the engine, in --workers local pilots "
                "(job_shape auto), as a batch run does; luigi's summary, exit codes and the tasks' events in this "
                "process stay, and the pilots end with the script (a killed run leaves none running its task). "
                "false: luigi's own worker runs them (b2luigi profile: false, since b2luigi runs them in luigi's "
                "worker).", kind=FLAG),
        Setting("process_once", False, "A second process() call in a script raises RuntimeError (b2luigi profile: "
                "true, as b2luigi allows one call).", kind=FLAG),
        Setting("process_returns_result", True, "process() returns luigi's run result (false: None, as b2luigi's "
                "process(); b2luigi profile: false).", kind=FLAG),
        Setting("run_summary", True, "At the end of process(): b2batch's summary on stderr and, after a --batch "
                "run, the timeline and the JSON report in log_dir (b2luigi profile: false; luigi's own summary is "
                "printed either way).", kind=FLAG),
        Setting("live_state", True, "While a --batch run, a Pool or a farm runs, its steering process writes where "
                "it stands into b2batch-live-*.json in its log folder (at most once a second) for 'b2batch monitor' "
                "(b2luigi profile: false; process(progress_tui=True) and joblib's export_metadata=True turn it on).",
                kind=FLAG),
        Setting("unknown_setting_warnings", True, "A warning line for each name in a settings.json or set_setting() "
                "that is no setting of b2batch (a likely typo stops the run either way). Read from set_setting() "
                "only (b2luigi profile: false).", kind=FLAG),
        Setting("max_jobs_in_flight", None, "Most jobs of one batch system submitted and not yet over, "
                "whatever luigi's workers; more wait in b2batch. None: no limit.",
                kind=_number(integer=True, minimum=1, none=True)),
        Setting("max_scheduler_calls_per_second", 5.0, "Cap on scheduler commands (submit, status, cancel) "
                "per second, for each batch system of a run.", kind=_number(above=0)),
        Setting("max_array_size", 1000, "Most jobs submitted together as one job array.",
                kind=_number(integer=True, minimum=1)),
        Setting("submission_window", 2.0, "Seconds a job that is ready to go waits for more ready tasks to "
                "join its job array while luigi still starts tasks; the wait doubles while the start goes on, "
                "and a full array (max_array_size) goes at once. 0 submits every job alone at once.", kind=SECONDS),
        Setting("scheduler_unreachable_timeout", 600.0, "Seconds a batch system may keep failing (submit "
                "or status commands) before its jobs fail with its last error.", kind=SECONDS),
        Setting("scheduler_call_timeout", 60.0, "Seconds a scheduler command (submit, status, cancel) may take; one "
                "that takes longer counts as a transient failure and is tried again.", kind=_number(above=0)),
        Setting("output_wait_timeout", 30.0, "Seconds to wait for outputs of a succeeded job to appear on "
                "the submit host (shared file systems) before the task fails.", kind=SECONDS),
        Setting("remote_retries", 6, "Tries of each operation on remote outputs (a root:// or davs:// result_dir, "
                "XRootD and WebDAV targets) before it fails; the waits between tries double from 0.5 s to 8 s.",
                kind=_number(integer=True, minimum=1)),
        # Per batch system.
        Setting("slurm_settings", {}, "Extra sbatch options, e.g. {\"cpus-per-task\": 2, \"mem\": \"2G\"}.", kind=DICT),
        Setting("sge_settings", {}, "Extra qsub options: queue, pe (\"smp 2\"), resources ({\"h_rt\": "
                "\"01:00:00\"}).", kind=DICT),
        Setting("htcondor_settings", {}, "Extra submit description commands, e.g. {\"request_cpus\": 2}.", kind=DICT),
        Setting("htcondor_pool", None, "HTCondor collector (host[:port]) whose schedd takes the jobs: condor_submit, "
                "condor_q, condor_history and condor_rm get -pool; default: the local configuration's.", kind=TEXT),
        Setting("htcondor_schedd", None, "Name of the HTCondor schedd that takes the jobs (-name of the condor_* "
                "commands); default: the local one.", kind=TEXT),
        Setting("transfer_files", [], "Files HTCondor transfers to the node (transfer_input_files).", kind=LIST),
        Setting("queue", None, "LSF queue (bsub -q).", kind=_of((str, int), 'a queue name')),
        Setting("job_slots", None, "LSF job slots (bsub -n).", kind=_number(integer=True, minimum=1, none=True)),
        Setting("lsf_settings", {}, "Extra bsub options, e.g. {\"W\": \"60\", \"R\": \"rusage[mem=2000]\"}.",
                kind=DICT),
        # Containers (docs/containers.md).
        Setting("container", None, "Run every job's command in a container: a dict with engine (apptainer, "
                "singularity, podman, docker), image, mounts (host paths, \"host[:container[:options]]\"), "
                "mount_defaults (true: also mount the working, result, log and job folders), options (more arguments "
                "of the engine) and executable (the engine's command).", kind=_of((dict,), "a dict (a JSON object)")),
        Setting("apptainer_image", None, "b2luigi's: run the job in this Apptainer/Singularity image (the "
                "batch_system 'apptainer' needs it).", kind=TEXT),
        Setting("apptainer_mounts", [], "b2luigi's: folders mounted into the apptainer_image container.", kind=LIST),
        Setting("apptainer_mount_defaults", True, "b2luigi's: also mount the folders the job needs (result, log, "
                "job and working folders).", kind=FLAG),
        Setting("apptainer_additional_params", "", "b2luigi's: more arguments of 'apptainer exec', as shell words.",
                kind=TEXT),
        Setting("apptainer_cmd", None, "b2luigi's: the command that runs apptainer_image containers: apptainer or "
                "singularity (default: the first of them on PATH).", kind=TEXT),
        # Many tasks per job.
        Setting("job_shape", "auto", "How tasks become batch jobs: auto (the run decides per task family and batch "
                "system, from how long its finished tasks took and how many are ready: pilots for short tasks, one job "
                "per task for long ones, bundles between; docs/job-shapes.md), job_per_task, bundles or pilots. "
                "Explicit pilot_jobs or tasks_per_job win (b2luigi profile: job_per_task).",
                kind=_choice("auto", "job_per_task", "bundles", "pilots")),
        Setting("tasks_per_job", 1, "Tasks that are ready together run one after another in one batch job, up "
                "to this many (bundles).", kind=_number(integer=True, minimum=1)),
        Setting("pilot_jobs", 0, "Pilot jobs per batch system that pull ready tasks from a queue on the shared "
                "file system until no work is left (0: no pilots).", kind=_number(integer=True, minimum=0)),
        Setting("pilot_idle_timeout", 60.0, "Seconds a pilot waits with nothing to claim before it ends (a new one "
                "is submitted when work comes).", kind=SECONDS),
        Setting("pilot_walltime", None, "Seconds a pilot job may run (default: the scheduler's end time of the "
                "job where it says, else unlimited); a pilot claims no task it could not finish in time.",
                kind=_number(above=0, none=True)),
        Setting("pilot_task_seconds", None, "Seconds a task needs at most in a pilot (default: the longest task "
                "that pilot ran so far).", kind=_number(above=0, none=True)),
        Setting("unit_logs", "auto", "Where a task or call that runs in a pilot or bundle job writes its stdout "
                "and stderr: own (log files of its own under log_dir, as a job of its own), pilot (into its pilot's "
                "or bundle's logs, its part starting with a line that names it; a failure names that file and "
                "quotes the unit's part of it: no log folder per unit), auto (pilot in a run without --batch and for "
                "b2batch.Pool's chunks, own otherwise).", kind=_choice("auto", "own", "pilot")),
        Setting("heartbeat_timeout", 60.0, "Seconds without a heartbeat after which a pilot or bundle job counts "
                "as lost and its task is run again elsewhere.", kind=_number(minimum=1)),
        Setting("max_grouping_size", 1, "b2luigi's parameter grouping: tasks of a class that differ only in its "
                "parameters with grouping=True run one after another in one batch job, up to this many (a bundle, "
                "on every batch system); 1: no grouping.", kind=_number(integer=True, minimum=1)),
    ]
}


class Computed:
    """A default of a profile that is worked out when it is first read (not when the settings are imported)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    def __repr__(self) -> str:
        return f"Computed({self.make.__name__})"


def _temporary_folder() -> str:
    import tempfile  # with random and shutil: ~3 ms on every import of b2batch, for b2luigi's scratch_dir only

    return tempfile.gettempdir()


#: Defaults layers, one per kind of workflow, between the ``default`` passed to :func:`get_setting` and the
#: declared defaults. ``b2luigi``: b2luigi 1.3's defaults, for a workflow written against b2luigi (outputs
#: in the script's folder, process() returns when a task failed, temporary outputs in the system's
#: temporary folder, no b2batch summary, timeline or report that b2luigi would not print or write).
PROFILES: dict[str, dict[str, Any]] = {
    "b2batch": {},
    "b2luigi": {"result_dir": ".", "exit_on_failure": False, "scratch_dir": Computed(_temporary_folder),
                "run_summary": False, "unknown_setting_warnings": False, "b2luigi_hashing": True,
                "process_returns_result": False, "b2luigi_texts": True, "job_shape": "job_per_task",
                "process_once": True, "local_runs_send_jobs": True, "local_runs_on_engine": False,
                "max_task_failures": None, "live_state": False,
                "job_folder_layout": "b2luigi",
                # b2luigi fails a task when its submit command fails, and when 4 status queries failed over
                # 2 + 6 + 18 s: not after b2batch's 10 minutes of waiting for the scheduler to come back
                "scheduler_unreachable_timeout": 26.0},
}


class DeprecatedSettingsWarning(DeprecationWarning):
    """A setting was found under a former (b2luigi) name; the message names the current one."""


#: Former names of settings (b2luigi's), still read under their current name with a
#: :class:`DeprecatedSettingsWarning`.
RENAMED_SETTINGS = {"result_path": "result_dir", "log_folder": "log_dir"}
