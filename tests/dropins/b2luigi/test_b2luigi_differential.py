"""``import b2luigi`` side by side: each script of ``tests/dropins/b2luigi/differential/scripts`` runs under the real
b2luigi 1.3.0 (its own venv, ``tests/peers/install.sh``) and under b2batch through the shim, in fresh folders,
and every difference in exit status, printed lines, exception types and files written fails its test unless
it is one of the differences listed in docs/migrating.md ("Differences from b2luigi 1.3"), matched by the
script's ``# allowed: D<n>: <regex>`` lines or by ``allowed.txt``. The list is the one list of differences and
must stay complete (each row with its reason) and honest (every difference the corpus is said to show, by an
``allowed`` line, still shows somewhere).

Each script runs from its own folder and from another folder (``harness.PLACES``). ``catalogue.txt`` names,
for every example of b2luigi's documentation and examples folder, the script that runs our equivalent of it
(or why none can run here).

The scripts run two at a time in the background from the first test on; each test waits for its own script.
All of it is marked ``slow``: the whole corpus, both places, takes about 4 minutes of wall time on 2 cores.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from peers import peer_python

ROOT = Path(__file__).resolve().parents[3]
MIGRATING = ROOT / "docs" / "migrating.md"
HEADING = "## Differences from b2luigi 1.3"


def _load_harness():
    path = ROOT / "tests" / "dropins" / "b2luigi" / "differential" / "harness.py"
    spec = importlib.util.spec_from_file_location("b2luigi_differential_harness", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
SCRIPTS = harness.scripts()
CASES = [(script, place) for script in SCRIPTS for place in harness.PLACES]
CATALOGUE = harness.HERE / "catalogue.txt"


def catalogue() -> list[tuple[str, str, str, str]]:
    """The lines of ``catalogue.txt``: page, example, script (``-``: none) and note."""
    rows = []
    for line in CATALOGUE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            page, example, script, note = ([part.strip() for part in line.split("|")] + ["", ""])[:4]
            rows.append((page, example, script, note))
    return rows


def listed_rows() -> list[tuple[str, str, str]]:
    """The id, difference and reason of each row of the table under ``## Differences from b2luigi 1.3`` in
    docs/migrating.md."""
    text = MIGRATING.read_text()
    if HEADING not in text:
        return []
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\|\s*(D\d+)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$", section, flags=re.MULTILINE)


def listed_differences() -> dict[str, str]:
    """The ids and texts of the listed differences."""
    return {id_: text for id_, text, _reason in listed_rows()}


def differences_the_corpus_shows() -> set[str]:
    """The ids that ``allowed.txt`` or a script's ``# allowed:`` lines name: the corpus must still show each."""
    texts = [(harness.HERE / "allowed.txt").read_text(), *(script.read_text() for script in SCRIPTS)]
    return {m for text in texts for m in re.findall(r"^#?\s*(?:allowed:\s*)?(D\d+):", text, flags=re.MULTILINE)}


class Outcomes:
    """Scripts' outcomes, computed two at a time in the background; a script not yet asked for starts when
    asked."""

    def __init__(self, python: str, cases: list[tuple[Path, str]]) -> None:
        self.python = python
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="b2luigi-diff")
        self.futures: dict[tuple[str, str], Future] = {}
        for script, place in cases:
            self._submit(script, place)

    def _submit(self, script: Path, place: str) -> Future:
        if (script.name, place) not in self.futures:
            self.futures[script.name, place] = self.pool.submit(harness.run_script, script, self.python, place)
        return self.futures[script.name, place]

    def get(self, script: Path, place: str = "here"):
        """The outcome of ``script`` started from ``place``."""
        return self._submit(script, place).result()


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> Iterator[Outcomes]:
    """The outcomes of the scripts whose tests this session runs (all of them when the test of the listed
    differences runs), started at once in the order of the tests."""
    selected = [item for item in request.session.items if item.module is request.module]
    if any(item.name.startswith("test_every_listed_difference") for item in selected):
        wanted = CASES
    else:
        wanted = [(item.callspec.params["script"], item.callspec.params["place"]) for item in selected
                  if hasattr(item, "callspec") and "script" in item.callspec.params]
    runner = Outcomes(str(peer_python("b2luigi")), wanted)
    yield runner
    runner.pool.shutdown(wait=True, cancel_futures=True)


def judged(outcome) -> tuple[list[str], set[str]]:
    """Differences no listed difference explains, and the listed ids this outcome shows. A pattern for an
    id that the table does not list explains nothing."""
    return harness.unexplained(harness.CORPUS / outcome.script, harness.compare(outcome),
                               set(listed_differences()))


def test_the_corpus_has_at_least_40_scripts_each_stating_its_runs() -> None:
    assert len(SCRIPTS) >= 40, [s.name for s in SCRIPTS]
    for script in SCRIPTS:
        # pytest would import a test_*.py script, and its `import b2luigi` would switch the whole test
        # session to the b2luigi profile
        assert not (script.name.startswith("test_") or script.name.endswith("_test.py")), script.name
        text = script.read_text()
        assert re.search(r"^# args:", text, flags=re.MULTILINE), f"{script.name} states no '# args:' line"
        assert "import b2luigi" in text, script.name
        harness.read_manifest(script)  # a malformed 'allowed' line raises


def test_every_example_of_b2luigis_docs_has_a_script_or_a_reason() -> None:
    rows = catalogue()
    assert len(rows) >= 60, len(rows)
    names = {script.stem for script in SCRIPTS}
    for page, example, script, note in rows:
        assert script == "-" or script in names, f"{page}: {example}: no script {script}.py in the corpus"
        assert script != "-" or note, f"{page}: {example}: no script and no reason"


@pytest.mark.slow
@pytest.mark.parametrize(("script", "place"), CASES, ids=[f"{s.stem}-{p}" for s, p in CASES])
def test_a_script_behaves_as_under_b2luigi(script: Path, place: str, outcomes: Outcomes) -> None:
    outcome = outcomes.get(script, place)
    left, _ = judged(outcome)
    assert not left, (f"{script.name} (from {place}): {len(left)} difference(s) from b2luigi 1.3.0 not listed in "
                      f"docs/migrating.md:\n  " + "\n  ".join(left) + "\n" + harness.report(outcome))


@pytest.mark.slow
def test_every_listed_difference_still_shows(outcomes: Outcomes) -> None:
    shown: set[str] = set()
    for script, place in CASES:
        shown |= judged(outcomes.get(script, place))[1]
    gone = sorted(differences_the_corpus_shows() - shown)
    assert not gone, f"listed in docs/migrating.md but shown by no script of the corpus (fixed? remove): {gone}"


def test_the_one_list_of_differences_gives_each_its_reason_and_names_what_the_corpus_shows() -> None:
    rows = listed_rows()
    ids = [id_ for id_, _text, _reason in rows]
    assert ids == [f"D{n}" for n in range(1, len(ids) + 1)], ids  # numbered in order, none twice
    assert all(text and reason for _id, text, reason in rows), rows
    assert differences_the_corpus_shows() <= set(ids)  # an allowed line names a listed difference
    text = MIGRATING.read_text()
    assert text.count("| id | difference | reason |") == 1  # one list of differences


def test_the_comparison_sees_each_kind_of_difference(tmp_path: Path) -> None:
    """The harness itself: a changed exit status, a missing or extra line, an exception of another type, a
    file elsewhere or with other text, a run of ours that did not end (also beside one of b2luigi's) are all
    differences; times, pids and folders are not."""
    def run(status, out, err, files):
        return harness.Run([], status, harness.normalise(out, tmp_path), harness.normalise(err, tmp_path), files)

    same = harness.Outcome("x.py", [run(0, "a\nb\n", f"pid 12 in {tmp_path}\n", {"r/o.txt": "1"})],
                           [run(0, "a\nb\nsummary\n", "pid 99 in " + str(tmp_path) + "\n", {"r/o.txt": "1"})])
    assert harness.compare(same) == ["run 1 (no arguments) stdout: extra line 'summary'"]
    traceback = "Traceback (most recent call last):\n  File \"x\", line 1\n    f()\n{}: {}\n"
    other = harness.Outcome("x.py", [run(0, "a\nb\n", traceback.format("ValueError", "bad"), {"r/o.txt": "1"})],
                            [run(1, "b\n", traceback.format("b2batch.errors.SettingError", "clearer"),
                                 {"results/r/o.txt": "1"})])
    kinds = harness.compare(other)
    assert "run 1 (no arguments) exit status: b2luigi 0, b2batch 1" in kinds
    assert "run 1 (no arguments) stdout: missing line 'a'" in kinds
    assert "run 1 (no arguments) stderr: missing line '<exception ValueError>'" in kinds
    assert "run 1 (no arguments) stderr: extra line '<exception SettingError>'" in kinds
    assert "run 1 (no arguments) files: missing r/o.txt" in kinds
    assert "run 1 (no arguments) files: extra results/r/o.txt" in kinds
    same_type = harness.Outcome("x.py", [run(0, "", traceback.format("ValueError", "short"), {})],
                                [run(0, "", traceback.format("ValueError", "a clearer message"), {})])
    assert harness.compare(same_type) == []
    hung = harness.Outcome("x.py", [run(None, "", "<timed out>", {})], [run(None, "", "<timed out>", {})])
    assert harness.compare(hung) == ["run 1 (no arguments): b2batch's run did not end within 90 s (nor b2luigi's)"]
