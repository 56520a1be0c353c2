"""HTCondor: a submit description rendered from a template and checked with the official bindings,
``condor_submit -terse`` to submit, one ``condor_q -json`` per poll for all the run's jobs (they share one
JobBatchName), ``condor_history`` for jobs that left the queue, ``condor_rm`` to kill.

JobStatus codes: https://htcondor.readthedocs.io/en/latest/classad-attributes/job-classad-attributes.html
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import parse

from b2batch.engine import Job, JobState, JobStatus, NativeState, causes
from b2batch.engine.escalation import Request, megabytes
from b2batch.engine.config import RunConfig
from b2batch.errors import (BatchSystemError, RunStoppingError, SchedulerCommandError, SettingError,
                            TransientCommandError)
from b2batch.systems import command_runner
from b2batch.systems.scheduler import SchedulerSystem
from b2batch.systems.job_settings import WRAPPER_SETTINGS
from b2batch.systems.tagging import safe_name
from b2batch.jobscript.templating import render


ATTRIBUTES = ("ClusterId,ProcId,JobStatus,ExitCode,ExitBySignal,HoldReason,HoldReasonCode,RemoveReason,RemoteHost,"
              "LastRemoteHost")
#: What the queries for the jobs of a submission's tag (systems/tagging.py) ask for, and of which jobs.
TAGGED_ATTRIBUTES, TAGGED = "ClusterId,ProcId,JobStatus,B2BatchSubmission", "B2BatchSubmission =!= undefined"
#: Hold codes of jobs HTCondor stopped for memory (34: over its memory request) and run time (46: job duration,
#: 47: execute duration exceeded).
MEMORY_HOLD_CODES = frozenset({34})
TIME_HOLD_CODES = frozenset({46, 47})
_MEMORY_WORDS = re.compile(r"memory", re.I)
_TIME_WORDS = re.compile(r"MaxRuntime|run ?time|wall ?time|duration|time limit", re.I)
#: Submit commands that bound a job's run time, in the order escalation looks for them.
TIME_COMMANDS = ("allowed_execute_duration", "+MaxRuntime", "allowed_job_duration")
_KEY = re.compile(r"\+?[A-Za-z_][A-Za-z0-9_.]*\Z")
#: Submit commands users set often: a key close to one of these but not one of them is a misspelling.
KNOWN_COMMANDS = frozenset("""
request_cpus request_memory request_disk request_gpus requirements rank universe arguments environment getenv
should_transfer_files when_to_transfer_output transfer_input_files transfer_output_files transfer_output_remaps
transfer_executable notification notify_user priority accounting_group accounting_group_user max_retries
retry_until success_exit_code periodic_remove periodic_hold periodic_release on_exit_hold on_exit_remove
concurrency_limits job_max_vacate_time docker_image container_image nice_user x509userproxy
use_x509userproxy stream_output stream_error input image_size max_materialize max_idle
want_graceful_removal kill_sig allowed_execute_duration allowed_job_duration gpus_minimum_capability
""".split())
#: What condor_submit answers when the submitting user may not own jobs: HTCondor's schedd refuses root ('Setting
#: job owner to "root" is not permitted' with CONDOR_IDS 0.0, else 'The given user is not allowed to own jobs').
_OWNER_REFUSED = re.compile(r'Setting job owner to "[^"]*" is not permitted|not allowed to own jobs', re.I)
#: The one line a run as root gets in place of that refusal.
ROOT_REFUSAL = ("HTCondor never runs jobs owned by root, and this run is root's (uid 0): run it as an ordinary user "
                "(log in as one, or `runuser -u USER -- COMMAND`), with its files in folders that user can "
                "write; nothing was submitted.")
#: Commands of the description that b2batch writes itself.
RESERVED = frozenset({"executable", "initialdir", "output", "error", "log", "jobbatchname", "batch_name", "queue"})


def merged_settings(task: Any, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's global htcondor_settings ``base`` overlaid with those of ``task`` (a job, or anything with
    ``setting``), without changing either."""
    merged = dict(base or {})
    merged.update(task.config["htcondor_settings"] or {})
    return merged


def submit_description(task: Any, executable: str, folder: str, batch_name: str, count: int = 1,
                       arguments: str = "", suffix: str = "", config: RunConfig = RunConfig(),
                       overlay: Mapping[str, Any] | None = None, tag: str = "") -> str:
    """The submit description of the task's job (or of an array of ``count`` jobs with the task's
    settings) in a run of ``config`` (its global htcondor_settings, its base folder), checked by
    ``htcondor2.Submit``; errors name the bad setting. ``overlay``: commands the run's policies set over the
    task's (an escalated request_memory, requirements that avoid excluded nodes). ``tag``: the submission's tag
    (systems/tagging.py: safe characters only), the jobs' attribute ``B2BatchSubmission``."""
    settings = {**checked_settings(task, config.htcondor_settings), **(overlay or {})}
    if any(c in text for text in (executable, folder) for c in "\r\n"):
        raise SettingError(f"Task {task}: the job folder {folder!r} contains a line break, which an HTCondor "
                           f"submit description cannot hold; choose another task_file_dir.")
    transfer = task.config["transfer_files"] or []
    what = f"task {task.key}" if count == 1 else f"an array of {count} {task.family} tasks"
    text = render("htcondor.sub.j2", what=what, executable=executable, arguments=arguments, folder=folder,
                  suffix=suffix, count=count, batch_name=batch_name, tag=safe_name(tag, 200) if tag else "",
                  transfer_files=[str(config.resolve(f)) for f in transfer],
                  settings=[(k, _value(v)) for k, v in settings.items()])
    # An array's jobs share these settings: an error found only now is one of all of them, not of the first.
    _check(text, settings, f"Task {task}" if count == 1 else f"The {count} {task.family} tasks of one array "
           f"({task} and others with the same htcondor_settings)")
    return text


def checked_settings(task: Any, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The task's merged htcondor_settings, each name and value checked, and its transfer_files checked; a
    bad one is a SettingError naming the task. Jobs are checked one by one before they are put into arrays,
    so that each error names its own task."""
    settings = merged_settings(task, base)
    for key, value in settings.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise SettingError(f"Task {task}: {key!r} in htcondor_settings is not a submit command name.")
        if not key.startswith("+") and key.lower() not in KNOWN_COMMANDS:
            close = difflib.get_close_matches(key.lower(), KNOWN_COMMANDS, n=2, cutoff=0.85)
            if close:
                raise SettingError(f"Task {task}: {key!r} in htcondor_settings is not an HTCondor submit command. "
                                   f"Did you mean {' or '.join(repr(c) for c in close)}?")
        if key.lower() in RESERVED:
            raise SettingError(f"Task {task}: htcondor_settings sets {key!r}, which b2batch writes itself; "
                               f"remove it (job_name, log_dir and task_file_dir change names and places).")
        if "\n" in str(value) or "\r" in str(value):
            raise SettingError(f"Task {task}: htcondor_settings[{key!r}] contains a line break, which a submit "
                               f"description cannot hold.")
    transfer = task.config["transfer_files"] or []
    if isinstance(transfer, str) or any("," in str(f) or "\n" in str(f) for f in transfer):
        raise SettingError(f"Task {task}: transfer_files must be a list of paths without commas, not {transfer!r}.")
    return settings


_HOST = re.compile(r"[A-Za-z0-9_.\-]+(:[0-9]+)?(,[A-Za-z0-9_.\-]+(:[0-9]+)?)*\Z")
_NAME = re.compile(r"[A-Za-z0-9_.@\-]+\Z")


def place(task: Any) -> tuple[str, ...]:
    """The ``-pool`` and ``-name`` options that send the condor_* commands of ``task``'s job to the pool and
    schedd of its ``htcondor_pool`` and ``htcondor_schedd`` settings (none: the local configuration's)."""
    options: list[str] = []
    for setting, option, pattern, form in (("htcondor_pool", "-pool", _HOST, "host[:port]"),
                                           ("htcondor_schedd", "-name", _NAME, "a schedd name such as "
                                            "schedd@host.example.org")):
        value = task.config[setting]
        if value in (None, ""):
            continue
        if not isinstance(value, str) or value.startswith("-") or not pattern.match(value):
            raise SettingError(f"Task {task}: {setting} = {value!r} is not {form}; set it to one, or leave it "
                               f"unset for the local HTCondor configuration's.")
        options += [option, value]
    return tuple(options)


def _recorded_place(journal: dict[str, Any]) -> tuple[str, ...] | None:
    """The -pool/-name options a job's journal recorded (None: a journal from before they were recorded)."""
    recorded = journal.get("htcondor_place")
    return None if recorded is None else tuple(str(option) for option in recorded)


def _at(command: list[str], where: tuple[str, ...]) -> list[str]:
    """``command`` sent to the pool and schedd ``where`` (its -pool/-name options right after the command)."""
    return [command[0], *where, *command[1:]]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check(text: str, settings: dict[str, Any], unit: str) -> None:
    import htcondor2  # the official bindings; imported only where a description is made

    try:
        parsed = dict(htcondor2.Submit(text))
    except Exception as e:  # the bindings raise ValueError/HTCondorException with little detail
        raise SettingError(f"{unit}: HTCondor cannot parse the submit description made from "
                           f"htcondor_settings {settings!r}: {e}") from e
    lowered = {k.lower() for k in parsed}
    for key in settings:
        name = f"my.{key[1:]}" if key.startswith("+") else key
        if name.lower() not in lowered:
            raise SettingError(f"{unit}: htcondor_settings[{key!r}] did not survive HTCondor's parsing "
                               f"of the submit description; check its name and value.")


def refused_as_root(error: BaseException, uid: int) -> bool:
    """Whether ``error`` (a failed condor_submit) is HTCondor's refusal of jobs owned by root, ``uid`` being the
    submitting user's."""
    return (uid == 0 and isinstance(error, SchedulerCommandError) and not isinstance(error, TransientCommandError)
            and bool(_OWNER_REFUSED.search(f"{error.stdout}\n{error.stderr}")))


def _cause(status: str, ad: dict[str, Any], reason: str) -> str:
    """Why HTCondor held or removed a job: its hold code, else the words of its reason."""
    if status not in ("3", "5"):
        return ""
    code = ad.get("HoldReasonCode")
    if code in MEMORY_HOLD_CODES:
        return causes.MEMORY
    if code in TIME_HOLD_CODES:
        return causes.TIME
    if "by user" in reason:
        return ""
    if _MEMORY_WORDS.search(reason):
        return causes.MEMORY
    if _TIME_WORDS.search(reason):
        return causes.TIME
    return ""


class HTCondorSystem(SchedulerSystem):
    """HTCondor in one run."""

    name = "htcondor"
    job_settings = (*WRAPPER_SETTINGS, "htcondor_settings", "htcondor_pool", "htcondor_schedd", "transfer_files")
    #: ``condor_submit -terse`` prints ``<cluster>.<first proc> - <cluster>.<last proc>``.
    job_id_formats: ClassVar[tuple[str, ...]] = ("{cluster:d}.{first:d} - {cluster2:d}.{last:d}",)
    state_map: ClassVar[dict[str, JobStatus]] = {
        "1": JobStatus.idle,          # Idle
        "2": JobStatus.running,       # Running
        "3": JobStatus.aborted,       # Removed
        "4": JobStatus.successful,    # Completed (the wrapper's exit code decides the task's fate)
        "5": JobStatus.aborted,       # Held
        "6": JobStatus.running,       # Transferring Output
        "7": JobStatus.running,       # Suspended
    }
    array_index: ClassVar[str | None] = "$(( $1 + 1 ))"  # arguments = $(Process), which counts from 0

    @property
    def batch_name(self) -> str:
        """The JobBatchName all jobs of the run share."""
        return f"b2b{self.run.tag}"

    @staticmethod
    def compose_id(fields: dict[str, Any]) -> str:
        return f"{fields['cluster']}.{fields['first']}"

    def __init__(self, run: Any) -> None:
        super().__init__(run)
        #: The -pool/-name options of each job followed, by job id: its queries and condor_rm go there too.
        self._places: dict[str, tuple[str, ...]] = {}
        #: The place of the job re-attaching now: that of the earlier run's jobs looked up along with it.
        self._earlier_place: tuple[str, ...] = ()
        #: Set once the schedd refused a job because the run is root's: no later submission is tried.
        self._refused: str | None = None

    def common_options(self, job: Job) -> list[str]:
        # Checked here, job by job: a job with bad settings is not put into an array, and its error names it.
        settings = {**checked_settings(job, self.run.config.htcondor_settings), **self.overlay(job)}
        return [json.dumps(settings, sort_keys=True, default=str),
                json.dumps(job.config["transfer_files"] or [], default=str), *place(job)]

    def overlay(self, job: Job) -> dict[str, Any]:
        """Submit commands the run's policies set over the job's own: the escalated ``request_memory`` and run
        time (``+MaxRuntime`` or the duration command the job set), and ``requirements`` that avoid the
        excluded nodes (each name a quoted ClassAd string)."""
        overlay: dict[str, Any] = {}
        escalated, excluded = self.escalated(job), self.excluded_nodes()
        if not escalated and not excluded:
            return overlay
        settings = merged_settings(job, self.run.config.htcondor_settings)
        if escalated is not None and escalated.memory_mb is not None:
            overlay["request_memory"] = int(escalated.memory_mb)
        if escalated is not None and escalated.time_s is not None:
            key = next((k for k in TIME_COMMANDS if k in settings), "+MaxRuntime")
            overlay[key] = int(escalated.time_s)
        if excluded:
            own = settings.get("requirements")
            avoid = " && ".join(f"(Machine != {json.dumps(node)})" for node in excluded)
            overlay["requirements"] = f"({own}) && {avoid}" if own not in (None, "") else avoid
        return overlay

    def requested(self, job: Job) -> Request:
        settings = merged_settings(job, self.run.config.htcondor_settings)
        try:
            memory = (megabytes(str(settings["request_memory"]).replace(" ", ""))
                      if settings.get("request_memory") not in (None, "") else None)
        except ValueError:  # an expression: not escalated
            memory = None
        time_s = None
        for key in TIME_COMMANDS:
            if key in settings:
                try:
                    time_s = float(settings[key])
                except (TypeError, ValueError):
                    pass
                break
        return Request(memory, time_s)

    def cause_of(self, native: NativeState) -> str:
        return native.cause

    def submit_command(self, job: Job) -> tuple[list[str], str | None]:
        description = submit_description(job, str(job.files.wrapper), str(job.files.folder), self.batch_name,
                                         config=self.run.config, overlay=self.overlay(job),
                                         tag=self.submitted_name(job))
        (job.files.folder / "job.sub").write_text(description)  # kept for the user to read
        # on stdin: condor_submit takes an argument with "=" (a b2luigi folder "n=1") for a submit command
        return ["condor_submit", *place(job), "-terse", "-"], description

    def array_command(self, first: Job, common: list[str], dispatch: Path, folder: Path,
                      count: int) -> tuple[list[str], str | None]:
        # The array's submit description uses the first job's settings (all share them: common_options).
        description = submit_description(first, str(dispatch), str(folder), self.batch_name, count=count,
                                          arguments="$(Process)", suffix=".$(Process)",
                                          config=self.run.config, overlay=self.overlay(first),
                                          tag=self.submitted_name(first))
        (folder / "array.sub").write_text(description)
        return ["condor_submit", *place(first), "-terse", "-"], description

    def _run_submit(self, command: list[str], stdin: str | None, what: str) -> Any:
        """condor_submit; HTCondor's refusal of a job owned by root becomes one line saying so and what to do,
        and the run tries no further submission (each would be refused the same way)."""
        if self._refused is not None:
            raise RunStoppingError(self._refused)
        try:
            return super()._run_submit(command, stdin, what)
        except BatchSystemError as e:
            if not refused_as_root(e.__cause__ or e, os.geteuid()):
                raise
            self._refused = ROOT_REFUSAL
            raise RunStoppingError(ROOT_REFUSAL) from None

    def array_job_ids(self, stdout: str, count: int) -> list[str]:
        for line in stdout.splitlines():
            found = parse.parse(self.job_id_formats[0], line.strip())
            if found is not None:
                return [f"{found['cluster']}.{found['first'] + i}" for i in range(count)]
        return []

    @classmethod
    def status_command(cls, job_ids: list[str]) -> list[str]:
        # By id, so that jobs of an earlier run (another JobBatchName) are found too.
        return ["condor_q", "-json", "-attributes", ATTRIBUTES, *job_ids]

    @classmethod
    def history_command(cls, job_ids: list[str]) -> list[str]:
        return ["condor_history", "-json", "-attributes", ATTRIBUTES, *job_ids]

    @classmethod
    def parse_status(cls, stdout: str) -> dict[str, NativeState]:
        if not stdout.strip():  # condor_q prints nothing (not []) when no job matches
            return {}
        states = {}
        for ad in json.loads(stdout):
            job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
            status = str(ad.get("JobStatus"))
            exit_code = ad.get("ExitCode")
            reason = ad.get("HoldReason") or ad.get("RemoveReason") or ""
            if status == "4" and (ad.get("ExitBySignal") or (exit_code not in (None, 0))):
                reason = reason or ("killed by a signal" if ad.get("ExitBySignal") else "")
            host = str(ad.get("RemoteHost") or ad.get("LastRemoteHost") or "").rpartition("@")[2]
            states[job_id] = NativeState(state=status, reason=reason,
                                         exit_code=int(exit_code) if exit_code is not None else None,
                                         node=host, cause=_cause(status, ad, reason))
        return states

    def _track(self, job: Job, job_id: str) -> None:
        where = self._places[job_id] = place(job)
        job.placement["htcondor_place"] = list(where)  # the journal says which pool and schedd ([]: local)
        super()._track(job, job_id)

    def recall(self, job_id: str, journal: dict[str, Any]) -> None:
        self._places[job_id] = _recorded_place(journal) or ()

    def forget(self, job: Job) -> None:
        super().forget(job)
        if job.job_id is not None:
            self._places.pop(job.job_id, None)

    def attach(self, job: Job, journal: dict[str, Any]) -> bool:
        # Where the earlier steering process sent the job, else (an older journal) where this task's settings
        # send it now.
        recorded = _recorded_place(journal)
        self._earlier_place = recorded if recorded is not None else place(job)
        return super().attach(job, journal)

    def _by_place(self, job_ids: list[str]) -> dict[tuple[str, ...], list[str]]:
        groups: dict[tuple[str, ...], list[str]] = {}
        for job_id in job_ids:
            groups.setdefault(self._places.get(job_id, self._earlier_place), []).append(job_id)
        return groups

    def query_states(self, job_ids: list[str]) -> dict[str, NativeState]:
        """One condor_q per schedd (one in all but unusual runs), then one condor_history for the jobs that
        left its queue."""
        states: dict[str, NativeState] = {}
        for where, ids in self._by_place(job_ids).items():
            found = self.parse_status(command_runner.run(_at(self.status_command(ids), where), timeout=self.call_timeout,
                                                         calls=self.calls).stdout)
            left = [j for j in ids if j not in found]
            if left:  # completed and removed jobs leave the queue: one history query for all of them
                found.update(self.parse_status(command_runner.run(_at(self.history_command(left), where),
                                                               timeout=self.call_timeout, calls=self.calls).stdout))
            states.update(found)
        return states

    def cancel_commands(self, job_ids: list[str]) -> list[list[str]]:
        per_place = super().cancel_commands
        return [_at(command, where) for where, ids in self._by_place(job_ids).items() for command in per_place(ids)]

    @classmethod
    def cancel_command(cls, job_ids: list[str]) -> list[str]:
        return ["condor_rm", *job_ids]

    def tagged_command(self, scope: tuple[str, ...]) -> list[str]:
        return _at(["condor_q", "-json", "-attributes", TAGGED_ATTRIBUTES, "-constraint", TAGGED], scope)

    def tagged_commands(self, scope: tuple[str, ...]) -> list[list[str]]:
        # A job that ended leaves the queue for the history at once: one that ended well between the front-end's
        # check and this query is found there (and followed), not submitted a second time.
        return [self.tagged_command(scope),
                _at(["condor_history", "-json", "-attributes", TAGGED_ATTRIBUTES, "-constraint", TAGGED], scope)]

    def parse_tagged(self, stdout: str) -> dict[str, dict[str, NativeState]]:
        tagged: dict[str, dict[str, NativeState]] = {}
        for ad in json.loads(stdout) if stdout.strip() else []:
            tagged.setdefault(str(ad.get("B2BatchSubmission")), {})[f"{ad['ClusterId']}.{ad['ProcId']}"] = (
                NativeState(state=str(ad.get("JobStatus"))))
        return tagged

    def matches(self, job_id: str, index: int | None) -> bool:
        return int(job_id.rpartition(".")[2]) + 1 == (index or 1)  # a job of its own is proc 0 of its cluster

    def tag_scope(self, intent: dict[str, Any], job: Job | None) -> tuple[str, ...]:
        recorded = _recorded_place(intent)
        return recorded if recorded is not None or job is None else place(job)

    def intent_extra(self, job: Job) -> dict[str, Any]:
        return {"htcondor_place": list(place(job))}

    def describe(self, native: NativeState) -> str:
        names = {"1": "Idle", "2": "Running", "3": "Removed", "4": "Completed", "5": "Held",
                 "6": "Transferring Output", "7": "Suspended"}
        text = f"htcondor JobStatus {native.state} ({names.get(native.state, 'unknown')})"
        if native.reason:
            text += f": {native.reason}"
        if native.exit_code is not None:
            text += f", ExitCode {native.exit_code}"
        return text

    def is_scheduler_side(self, native: NativeState) -> bool:
        # Held (5) or removed (3) by the pool (policy, a lost slot, a failed transfer), not by a user.
        return native.state in ("3", "5") and "by user" not in native.reason

    def on_final_state(self, job: Job, native: NativeState, state: JobState) -> JobState:
        if native.state == "5":
            self.cancel([job])  # a held job would wait in the queue for ever
        return state
