"""Container command lines are made in one place (issue 41, must-have 4): the tripwire.

``b2batch/jobscript/container_command.py`` spells every container engine's command line. No other module of
b2batch or of the b2luigi shim may spell one: no engine option (``--bind``, ``--pwd``, ``--volume=``,
``--workdir=``, ``--image=``, ``--module=``, ``--network=``, ``--env=``, ``--init``, ``--rm``) as a string, and
no list that starts an engine's subcommand (``[<engine or an expression>, "exec" | "run", ...]``, or
``["exec" | "run", ...]`` added to one).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THE_PLACE = ROOT / "b2batch" / "jobscript" / "container_command.py"
PACKAGES = (ROOT / "b2batch", ROOT / "compat" / "b2luigi-shim" / "b2luigi")
ENGINE_NAMES = {"apptainer", "singularity", "podman", "docker", "shifter"}
SUBCOMMANDS = {"exec", "run"}
EXACT_OPTIONS = {"--bind", "--pwd", "--init", "--rm", "--volume"}
OPTION_PREFIXES = ("--bind=", "--pwd=", "--volume=", "--workdir=", "--image=", "--module=", "--network=", "--env=")


def _is(node: ast.AST, words: set[str]) -> bool:
    return isinstance(node, ast.Constant) and node.value in words


def _starts_a_subcommand(elements: list[ast.expr], added: bool) -> bool:
    if added and elements and _is(elements[0], SUBCOMMANDS):
        return True
    if len(elements) < 2 or not _is(elements[1], SUBCOMMANDS):
        return False
    first = elements[0]
    return _is(first, ENGINE_NAMES) or not (isinstance(first, ast.Constant) or isinstance(first, ast.JoinedStr))


def spelled_command_lines(source: str) -> list[str]:
    """Where ``source`` spells a container engine's command line: ``line: what``."""
    tree = ast.parse(source)
    added = {id(node.right) for node in ast.walk(tree) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)}
    added |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.AugAssign)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # an f-string's parts too
            if node.value in EXACT_OPTIONS or node.value.startswith(OPTION_PREFIXES):
                found.append(f"{node.lineno}: the engine option {node.value!r}")
        if isinstance(node, (ast.List, ast.Tuple)) and _starts_a_subcommand(node.elts, id(node) in added):
            found.append(f"{node.lineno}: an engine's {ast.unparse(node)[:60]}")
    return sorted(set(found), key=lambda where: (int(where.split(":")[0]), where))


def test_only_the_container_command_module_spells_an_engines_command_line() -> None:
    offenders = {}
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            if path == THE_PLACE or "build" in path.relative_to(package).parts:
                continue
            found = spelled_command_lines(path.read_text())
            if found:
                offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, ("container command lines spelt outside b2batch/jobscript/container_command.py (describe "
                           f"the container as a ContainerCommand and take its argv()): {offenders}")


def test_the_scan_finds_the_spellings_it_looks_for() -> None:
    assert spelled_command_lines('argv = [exe, "exec", f"--bind={m}", image]\n') == [
        "1: an engine's [exe, 'exec', f'--bind={m}', image]", "1: the engine option '--bind='"]
    assert spelled_command_lines('argv = ["podman", "run"]\n')
    assert spelled_command_lines('argv = [exe]\nargv += ["exec", image]\n')
    assert spelled_command_lines('argv += ["--bind", mount]\n')
    assert spelled_command_lines('x = ["shifter", f"--image={image}"]\n')
    assert not spelled_command_lines('p.add_argument("--workdir", "-w")\nx = ["b2batch", "run"]\n'
                                     'y = frozenset(["alias", "exec", "run"])\n')


def test_the_one_place_spells_them() -> None:
    assert spelled_command_lines(THE_PLACE.read_text())
