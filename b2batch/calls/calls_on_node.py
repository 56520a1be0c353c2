"""The node side of a job of Python calls: load the calls, run them in order, write back their values or the
first exception with its traceback.

A call file holds a cloudpickled list of ``(function, args, kwargs)``; the result file gets a cloudpickled
:class:`Outcome` (a small one, in a pilot's or bundle's runner, goes to the worker instead: :func:`_write`). A
function of the caller's ``__main__`` (a script or a notebook) travels by value, as cloudpickle does it; other
functions are imported by module name, so the caller's ``sys.path`` comes along.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from b2batch.jobscript import base_folder

#: Exit code of a job whose call raised (its exception is in the result file).
CALL_RAISED = 1
#: Exit code of a job whose result could not be written (e.g. a value that cannot be pickled).
RESULT_UNWRITABLE = 2


@dataclass
class Outcome:
    """What the calls of one job gave: every value, or the exception of the call that raised."""

    values: list[Any] = field(default_factory=list)
    error: BaseException | None = None
    #: Index, in the job's list, of the call that raised.
    index: int | None = None
    #: The traceback of that exception as the node printed it.
    traceback: str = ""
    #: Seconds the calls ran (in a pack: this call's own time).
    seconds: float = 0.0

    def __reduce__(self) -> tuple[Any, ...]:  # the fields in order, not by name: a third of the bytes
        return Outcome, (self.values, self.error, self.index, self.traceback, self.seconds)


@dataclass
class PackOutcome:
    """What a pack of calls gave (:func:`run_pack`): one :class:`Outcome` per call that was packed, in order."""

    outcomes: list[Outcome] = field(default_factory=list)


def _add_paths(entries: list[str]) -> None:
    """Put the caller's import path after the node's own, so that modules next to the caller's script (or its
    working directory) import in the job."""
    known = set(sys.path)
    for entry in entries:
        if entry not in known and os.path.isdir(entry):
            sys.path.append(entry)
            known.add(entry)


#: Most bytes of a pickled outcome that a unit in a worker's runner hands to its worker (base64 in the line of the
#: worker's log, read by the steering process anyway) instead of writing ``result.pkl``.
HAND_LIMIT = 8192


def _write(path: Path, payload: bytes) -> None:
    """The outcome: handed to the worker when small and in a runner (no file), else written to ``path``."""
    runner = sys.modules.get("b2batch.engine.pilots.unit_processes")  # loaded where a worker runs units
    if runner is not None and len(payload) <= HAND_LIMIT:
        import base64

        if runner.hand_result({"pickled": base64.b64encode(payload).decode("ascii")}):
            return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(payload)
    except FileNotFoundError:  # a unit whose input came in its entry has no job folder yet
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(payload)
    os.replace(temporary, path)


def _dump_error(error: BaseException, index: int | None, text: str) -> bytes:
    """The outcome of a call that raised; an exception that cannot be pickled is sent as a RuntimeError that
    names it."""
    import cloudpickle

    try:
        return cloudpickle.dumps(Outcome(error=error, index=index, traceback=text))
    except Exception as e:
        stand_in = RuntimeError(f"{type(error).__module__}.{type(error).__qualname__}: {error} (the exception "
                                f"could not be pickled to send it back: {e})")
        return cloudpickle.dumps(Outcome(error=stand_in, index=index, traceback=text))


def _load(source: Path, inline: bytes | None, delete_on_load: bool) -> Any:
    """The pickled calls: carried in the unit's entry (``inline``), else read from their file."""
    if inline is not None:
        return pickle.loads(inline)
    calls = pickle.loads(source.read_bytes())
    if delete_on_load:
        source.unlink(missing_ok=True)
    return calls


def run_calls(call_file: str, result_file: str, import_path: list[str] | None = None,
              delete_on_load: bool = False, base_dir: str | None = None, inline: bytes | None = None) -> int:
    """Run the calls of ``call_file`` (or of ``inline``, its bytes carried in a pilot's entry) and write their
    :class:`Outcome` to ``result_file``; the exit code.

    ``base_dir`` is the caller's base folder: relative folders of settings used by calls in the job (a nested
    ``Parallel``'s task files and logs) are relative to it, not to the job entry point's package folder."""
    import cloudpickle

    _no_json_result()
    if base_dir:
        base_folder.pin_base_dir(base_dir)
    _add_paths(import_path or [])
    source, target = Path(call_file), Path(result_file)
    index: int | None = None
    try:
        calls = _load(source, inline, delete_on_load)
        values = []
        for index, (function, args, kwargs) in enumerate(calls):
            values.append(function(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt of a call go back too
        text = traceback.format_exc()
        sys.stderr.write(text)
        _write(target, _dump_error(e, index, text))
        return CALL_RAISED
    try:
        payload = cloudpickle.dumps(Outcome(values=values))
    except Exception as e:
        message = (f"The value returned by the call could not be pickled to send it back: {type(e).__name__}: "
                   f"{e}. Return plain data (numbers, strings, lists, dicts, arrays) instead.")
        text = traceback.format_exc()
        sys.stderr.write(text)
        _write(target, _dump_error(pickle.PicklingError(message), None, text))
        return RESULT_UNWRITABLE
    _write(target, payload)
    return 0


def _no_json_result() -> None:
    """Calls write no ``result.json`` (their result is the pickle): in a worker's runner, say so to the worker,
    whose log line then tells the steering process not to look for one."""
    runner = sys.modules.get("b2batch.engine.pilots.unit_processes")  # loaded where a worker runs units
    if runner is not None:
        runner.hand_result(None)


def _run_packed(payload: bytes) -> Outcome:
    """One packed submission (a pickled list of calls): its values, or the first exception, and its time."""
    begin = time.perf_counter()
    index: int | None = None
    try:
        calls = pickle.loads(payload)
        begin = time.perf_counter()  # the calls' own time: loading them may import their modules first
        values = []
        for index, (function, args, kwargs) in enumerate(calls):
            values.append(function(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - as run_calls: everything goes back to its own caller
        text = traceback.format_exc()
        sys.stderr.write(text)
        return Outcome(error=e, index=index, traceback=text, seconds=time.perf_counter() - begin)
    return Outcome(values=values, seconds=time.perf_counter() - begin)


def _pack_bytes(pack: PackOutcome) -> bytes:
    """The pickled pack; a call whose value or exception cannot be pickled gets an error of its own instead."""
    import cloudpickle

    try:
        return cloudpickle.dumps(pack)
    except Exception:  # noqa: BLE001 - find the calls that cannot go back
        pass
    for number, outcome in enumerate(pack.outcomes):
        try:
            cloudpickle.dumps(outcome)
        except Exception as e:  # noqa: BLE001
            if outcome.error is not None:
                pack.outcomes[number] = Outcome(error=pickle.loads(_dump_error(outcome.error, outcome.index,
                                                                                outcome.traceback)).error,
                                                index=outcome.index, traceback=outcome.traceback)
                continue
            message = (f"The value returned by the call could not be pickled to send it back: {type(e).__name__}: "
                       f"{e}. Return plain data (numbers, strings, lists, dicts, arrays) instead.")
            sys.stderr.write(message + "\n")
            pack.outcomes[number] = Outcome(error=pickle.PicklingError(message), traceback=message,
                                            seconds=outcome.seconds)
    return cloudpickle.dumps(pack)


def run_pack(call_file: str, result_file: str, import_path: list[str] | None = None,
             delete_on_load: bool = False, base_dir: str | None = None, inline: bytes | None = None) -> int:
    """Run a pack of submissions (``call_file`` or ``inline``: a pickled list of pickled call lists), each on its own: one
    raising does not stop the others. Write their :class:`PackOutcome` to ``result_file``; exit 0 once it is
    written (the calls' exceptions are in it), :data:`RESULT_UNWRITABLE` if it could not be."""
    _no_json_result()
    if base_dir:
        base_folder.pin_base_dir(base_dir)
    _add_paths(import_path or [])
    source, target = Path(call_file), Path(result_file)
    try:
        payloads = _load(source, inline, delete_on_load)
    except BaseException as e:  # noqa: BLE001 - the pack could not even be read: its calls all get this
        text = traceback.format_exc()
        sys.stderr.write(text)
        _write(target, _dump_error(e, None, text))
        return CALL_RAISED
    pack = PackOutcome(outcomes=[_run_packed(payload) for payload in payloads])
    try:
        _write(target, _pack_bytes(pack))
    except Exception:  # noqa: BLE001
        sys.stderr.write(traceback.format_exc())
        return RESULT_UNWRITABLE
    return 0
