"""Runs a b2luigi workflow script of this corpus twice, under the real b2luigi 1.3.0 and under b2batch through
its shim, each in a fresh folder with the same clean environment, and lists what differs.

A script states how it is run in comment lines at its top:

``# args: --remove MyTask -y``  one run of the script with these arguments (shlex-split); several ``args``
                                lines are runs one after the other in the same folder (no line: one run,
                                no arguments)
``# env: NAME=VALUE``           an environment variable for every run (``{dir}`` is the run's folder)
``# stdin: y``                  what the runs read on stdin (default: nothing, stdin closed)
``# allowed: D2: REGEX``        differences whose description matches REGEX are b2batch's listed D2

What is compared, per run (after normalising folder paths, pids, luigi's worker ids, times and temporary
names):

* the exit status;
* stdout and stderr, each a list of non-blank lines: b2luigi's lines must be ours, in the same order, and
  ours may have no other lines: the comparison is exact, because under the b2luigi profile b2batch adds
  nothing where b2luigi prints (its summary is off), and a line more is something a user sees (a warning, an
  error, a changed text); a difference names each missing and each extra line, so that a listed difference
  can allow just those. A traceback is compared by its exception type alone (b2batch may say more in its
  message, and its frames are its own), a ``Type: message`` line likewise;
* the files in the folder after each run: relative paths, and the normalised text of each file. Two kinds
  of files are compared more loosely, because their text is the job machinery's, not the workflow's: a
  log file (below ``logs/``) holds b2luigi's lines, minus the preamble of b2luigi's executable wrapper
  (``Working in the folder:``, ``Current environment:`` and the environment it dumps), in order, and may
  hold more (b2batch's job runner logs there); the text of a job file (below ``task_files/``) is not
  compared, only its path.

Every script runs twice on each side: from its own folder (``python script.py``) and from another folder
(``python <folder>/script.py`` with the working directory a sibling folder, ``elsewhere``), as users start
scripts both ways; files written into that working directory are compared too, under ``<cwd>/``.

Each difference is a one-line description (``run 2 (--dry-run) stdout: missing line 'In total 3'``), so that
the ``allowed`` patterns of a script and of ``allowed.txt`` (patterns every script may show) can match it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "scripts"
MODULES = HERE / "modules"  # modules some scripts import, copied beside every script (as a user's own modules)
ROOT = HERE.parents[3]
SHIM = ROOT / "compat" / "b2luigi-shim"
TIMEOUT = 90.0
#: Where a run starts: in the script's folder, or in another folder with the script named by its path.
PLACES = ("here", "elsewhere")
#: The prefix of files written into the other working directory, in a snapshot.
CWD_PREFIX = "<cwd>/"

#: Environment variables a run inherits from the test's environment; everything else is dropped, so that
#: no settings file, b2batch or b2luigi variable of the caller leaks into either side.
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


@dataclass
class Manifest:
    runs: list[list[str]]
    env: dict[str, str]
    stdin: str | None
    allowed: list[tuple[str, re.Pattern[str]]]


@dataclass
class Run:
    """One run of a script on one side: what it printed and left behind."""

    args: list[str]
    status: int | None
    stdout: list[str]
    stderr: list[str]
    files: dict[str, str | None]  # relative path -> normalised text (None: binary)
    seconds: float = 0.0


@dataclass
class Outcome:
    script: str
    peer: list[Run] = field(default_factory=list)
    ours: list[Run] = field(default_factory=list)


def scripts() -> list[Path]:
    return sorted(CORPUS.glob("*.py"))


def read_manifest(script: Path) -> Manifest:
    runs: list[list[str]] = []
    env: dict[str, str] = {}
    stdin = None
    allowed = []
    for line in script.read_text().splitlines():
        match = re.match(r"#\s*(args|env|stdin|allowed):\s?(.*)$", line)
        if not match:
            continue
        kind, value = match.groups()
        if kind == "args":
            runs.append(shlex.split(value))
        elif kind == "env":
            name, _, val = value.partition("=")
            env[name.strip()] = val.strip()
        elif kind == "stdin":
            stdin = value.replace("\\n", "\n")
        else:
            allowed.append(parse_allowed(value, script.name))
    return Manifest(runs or [[]], env, stdin, allowed)


def parse_allowed(value: str, where: str) -> tuple[str, re.Pattern[str]]:
    ident, sep, pattern = value.partition(":")
    if not sep or not re.fullmatch(r"D\d+", ident.strip()):
        raise ValueError(f"{where}: an allowed line is 'D<n>: <regex>', not {value!r}")
    return ident.strip(), re.compile(pattern.strip())


def global_allowed() -> list[tuple[str, re.Pattern[str]]]:
    """Patterns of ``allowed.txt``: listed differences that any script may show."""
    path = HERE / "allowed.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return [parse_allowed(line, path.name) for line in lines if line.strip() and not line.startswith("#")]


def environment(folder: Path, manifest: Manifest, ours: bool) -> dict[str, str]:
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env.update(HOME=str(folder.parent / "home"), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONHASHSEED="0", COLUMNS="200", TERM="dumb", NO_COLOR="1")
    if ours:
        env["PYTHONPATH"] = os.pathsep.join((str(SHIM), str(ROOT)))
    for name, value in manifest.env.items():
        env[name] = value.replace("{dir}", str(folder))
    return env


def run_side(script: Path, python: str, ours: bool, base: Path, place: str = "here") -> list[Run]:
    """All runs of ``script`` under one interpreter, in a fresh folder below ``base``, started in that folder
    (``place`` "here") or in a sibling folder with the script named by its path ("elsewhere")."""
    manifest = read_manifest(script)
    folder = base / "work"
    (base / "home").mkdir(parents=True)
    folder.mkdir()
    cwd = folder if place == "here" else base / "elsewhere"
    cwd.mkdir(exist_ok=True)
    target = script.name if place == "here" else str(folder / script.name)
    shutil.copy(script, folder / script.name)
    for module in MODULES.glob("*.py"):
        shutil.copy(module, folder / module.name)
    env = environment(folder, manifest, ours)
    runs = []
    for args in manifest.runs:
        stdin = {"input": manifest.stdin} if manifest.stdin is not None else {"stdin": subprocess.DEVNULL}
        started = time.monotonic()
        try:
            done = subprocess.run([python, target, *args], cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=TIMEOUT, **stdin)
            status, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as expired:
            status, out, err = None, _text(expired.stdout), _text(expired.stderr) + "\n<timed out>"
        files = snapshot(folder, script.name)
        if cwd != folder:
            files.update({CWD_PREFIX + rel: text for rel, text in snapshot(cwd, script.name, folder).items()})
        runs.append(Run(args, status, normalise(out, folder), normalise(err, folder), files,
                        time.monotonic() - started))
    return runs


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


# --- normalising ------------------------------------------------------------------------------------------

_SUBSTITUTIONS = [
    (re.compile(r"Worker\(salt=[^)]*\)"), "Worker(...)"),
    (re.compile(r"\bpid[ =]\d+"), "pid N"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<TIME>"),
    (re.compile(r"-luigi-tmp-\d+"), "-luigi-tmp-N"),
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:s|seconds|ms)\b"), "<DURATION>"),
    (re.compile(r"0x[0-9a-f]{6,}"), "0x..."),
]
#: A line of Python's warnings module: ``<file>:<line>: <Category>: <message>``; the file and line are where the
#: warning was raised (each side's own install), so only the category and message are compared, and the source
#: line printed under it is dropped.
_WARNING = re.compile(r"^\S+\.py:\d+: ((?:[A-Za-z_]\w*\.)*\w*Warning): (.*)$")
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning))(?::.*)?$")


def normalise(text: str, folder: Path) -> list[str]:
    """The non-blank lines of ``text``, with the folder, pids, times and worker ids made neutral; each
    traceback becomes one line naming its exception type."""
    for place in {str(folder), os.path.realpath(folder)}:
        text = text.replace(place, "<DIR>")
    for place in {str(folder.parent), os.path.realpath(folder.parent)}:
        text = text.replace(place, "<BASE>")
    lines: list[str] = []
    in_traceback = after_warning = False
    for raw in text.splitlines():
        line = raw.rstrip()
        for pattern, replacement in _SUBSTITUTIONS:
            line = pattern.sub(replacement, line)
        if not line.strip():
            continue
        if after_warning and line.startswith(" "):
            after_warning = False
            continue  # the source line under a warning
        warning = _WARNING.match(line)
        after_warning = bool(warning)
        if warning:
            lines.append(f"<warning> {warning.group(1).rsplit('.', 1)[-1]}: {warning.group(2)}")
            continue
        stripped = line.strip()
        if stripped == _TRACEBACK or stripped.startswith("During handling") or \
                stripped.startswith("The above exception"):
            in_traceback = True
            continue
        if in_traceback and (line.startswith(" ") or line.startswith("\t") or stripped.startswith("^")):
            continue  # a frame of the traceback: b2batch's frames are its own
        match = _EXCEPTION.match(stripped)
        if match:
            name = match.group(1).rsplit(".", 1)[-1]
            line = f"<exception {name}>"
        in_traceback = False
        lines.append(line)
    return lines


def snapshot(folder: Path, script_name: str, script_folder: Path | None = None) -> dict[str, str | None]:
    """The files below ``folder`` (but the script and caches): relative path -> normalised text, paths in it
    made neutral as those of ``script_folder`` (default: ``folder``)."""
    files: dict[str, str | None] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.name == script_name:
            continue
        rel = re.sub(r"-luigi-tmp-\d+", "-luigi-tmp-N", str(path.relative_to(folder)))
        try:
            files[rel] = "\n".join(normalise(path.read_text(), script_folder or folder))
        except (UnicodeDecodeError, OSError):
            files[rel] = None
    return files


# --- comparing --------------------------------------------------------------------------------------------

def compare_lines(where: str, peer: list[str], ours: list[str]) -> Iterable[str]:
    """b2luigi's lines must appear in ours in order (a subsequence); ours may have no others."""
    position = 0
    matched = [False] * len(ours)
    for line in peer:
        for index in range(position, len(ours)):
            if ours[index] == line:
                matched[index] = True
                position = index + 1
                break
        else:
            yield f"{where}: missing line {line!r}"
    for index, line in enumerate(ours):
        if not matched[index]:
            yield f"{where}: extra line {line!r}"


LOG_FILES = "logs/"
JOB_FILES = "task_files/"
_WRAPPER_LINES = re.compile(r"^(Working in the folder:|Setting up the environment|Current environment:|"
                            r"Will now execute the program|<DIR>$|<BASE>|[A-Za-z_][A-Za-z0-9_]*=)")


def _wrapper_line(line: str) -> bool:
    """A line that b2luigi's executable wrapper prints before the task: its folder and its environment."""
    return bool(_WRAPPER_LINES.match(line))


def compare(outcome: Outcome) -> list[str]:
    differences: list[str] = []
    for number, (peer, ours) in enumerate(zip(outcome.peer, outcome.ours), start=1):
        where = f"run {number} ({' '.join(peer.args) or 'no arguments'})"
        if peer.status != ours.status:
            differences.append(f"{where} exit status: b2luigi {peer.status}, b2batch {ours.status}")
        elif ours.status is None:  # both timed out: a hang of ours is never a match
            differences.append(f"{where}: b2batch's run did not end within {TIMEOUT:g} s (nor b2luigi's)")
        differences += compare_lines(f"{where} stdout", peer.stdout, ours.stdout)
        differences += compare_lines(f"{where} stderr", peer.stderr, ours.stderr)
        for rel in sorted(set(peer.files) | set(ours.files)):
            if rel not in ours.files:
                differences.append(f"{where} files: missing {rel}")
            elif rel not in peer.files:
                differences.append(f"{where} files: extra {rel}")
            elif rel.removeprefix(CWD_PREFIX).startswith(JOB_FILES):
                continue
            elif rel.removeprefix(CWD_PREFIX).startswith(LOG_FILES):
                expected = [line for line in (peer.files[rel] or "").splitlines() if not _wrapper_line(line)]
                actual = (ours.files[rel] or "").splitlines()
                differences += [d for d in compare_lines(f"{where} log {rel}", expected, actual)
                                if ": missing line " in d]
            elif peer.files[rel] != ours.files[rel]:
                differences.append(f"{where} files: content of {rel}: b2luigi {_short(peer.files[rel])}, "
                                   f"b2batch {_short(ours.files[rel])}")
    return differences


def _short(text: str | None, limit: int = 160) -> str:
    text = "<binary>" if text is None else text
    return repr(text if len(text) <= limit else text[:limit] + "...")


def unexplained(script: Path, differences: list[str],
                listed: set[str] | None = None) -> tuple[list[str], set[str]]:
    """The differences no allowed pattern covers, and the ids whose patterns matched one; with ``listed``,
    only the patterns of those ids count."""
    patterns = [(ident, pattern) for ident, pattern in read_manifest(script).allowed + global_allowed()
                if listed is None or ident in listed]
    left, shown = [], set()
    for difference in differences:
        ids = {ident for ident, pattern in patterns if pattern.search(difference)}
        shown |= ids
        if not ids:
            left.append(difference)
    return left, shown


def run_script(script: Path, peer_python: str, place: str = "here") -> Outcome:
    """Both sides of one script, each in a fresh temporary folder, started from ``place`` (``PLACES``)."""
    outcome = Outcome(script.name)
    with tempfile.TemporaryDirectory(prefix="b2luigi-diff-") as tmp:
        outcome.peer = run_side(script, peer_python, False, Path(tmp) / "b2luigi", place)
        outcome.ours = run_side(script, sys.executable, True, Path(tmp) / "b2batch", place)
    return outcome


def report(outcome: Outcome) -> str:
    """Both sides' runs, for a failing test's message."""
    parts = []
    for side, runs in (("b2luigi", outcome.peer), ("b2batch", outcome.ours)):
        for number, run in enumerate(runs, start=1):
            parts.append(f"--- {side} run {number} {run.args} exit {run.status}")
            parts += [f"  out| {line}" for line in run.stdout]
            parts += [f"  err| {line}" for line in run.stderr]
            parts += [f"  file {rel}" for rel in run.files]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    """``python harness.py PEER_PYTHON [SCRIPT ...]``: the differences of each script, for a quick look."""
    from concurrent.futures import ThreadPoolExecutor

    peer, names = argv[0], argv[1:]
    places = [p for p in PLACES if os.environ.get("DIFF_PLACE", p) == p]
    chosen = [(s, p) for s in scripts() if not names or s.stem in names or s.name in names for p in places]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for (_, place), outcome in zip(chosen, pool.map(lambda c: run_script(c[0], peer, c[1]), chosen)):
            left, shown = unexplained(CORPUS / outcome.script, compare(outcome))
            took = " ".join(f"{sum(r.seconds for r in runs):.1f}" for runs in (outcome.peer, outcome.ours))
            print(f"== {outcome.script} ({place}): {len(left)} unexplained, listed shown: {sorted(shown) or '-'} "
                  f"(b2luigi, b2batch: {took} s)")
            for difference in left:
                print(f"   {difference}")
            if "-v" in os.environ.get("DIFF_VERBOSE", ""):
                print(report(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
