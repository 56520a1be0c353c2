"""The job wrapper without jinja: its template rendered ahead, once for each shape a wrapper without a container
can have (``env_script`` or none, ``checkpoint`` or not), into ``templates/executable_wrapper.skeletons.json``.

Each shape is stored as parts: text, or the name of a value that goes between two texts: one of the settings
(``shell``, ``working_dir``, ``env_script``: shell-quoted; ``env``: one ``export`` line per variable) or one of
a job's own values (``0``-``6``, see :func:`b2batch.jobscript.wrapper.render_job_wrapper`). A wrapper is then put
together from strings: importing jinja and rendering the template cost a steering process ~25 ms, most of what a
small ``Pool.map`` on local pilots takes. The file holds the template's SHA-256; when the template was changed
and the file not made again (``python -m b2batch.jobscript.skeletons``), wrappers are rendered with jinja, and a
test says so.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

from b2batch.engine.digests import sha256_hex
from b2batch.jobscript.templating import quote, render

TEMPLATE = Path(__file__).resolve().parent / "templates" / "executable_wrapper.sh.j2"
STORED = TEMPLATE.with_name("executable_wrapper.skeletons.json")
#: Words (shell-safe, so that quoting leaves them as they are) that stand for the values in the rendering ahead.
_MARK = "b2batchskeletonslot"
_MARKED = re.compile(rf"{_MARK}([a-z_0-9]+)x")
_SETTINGS = ("shell", "working_dir", "env_script")
_ENV_LINE = f"export {_MARK}envx={_MARK}envvaluex\n"


def _key(env_script: bool, checkpoint: bool) -> str:
    return f"env_script={int(env_script)},checkpoint={int(checkpoint)}"


def generate() -> dict[str, Any]:
    """Render the template for every shape (with jinja): what ``STORED`` holds."""
    shapes = {}
    for env_script in (False, True):
        for checkpoint in (False, True):
            slot = {name: f"{_MARK}{name}x" for name in (*_SETTINGS, *map(str, range(7)))}
            text = render(TEMPLATE.name, shell=slot["shell"], task_id=slot["0"], log_folder=slot["1"], stdout=slot["2"],
                          stderr=slot["3"], exit_code_file=slot["4"], setup_failed_file=slot["5"],
                          env_script=slot["env_script"] if env_script else None, env=[(f"{_MARK}envx", f"{_MARK}envvaluex")],
                          working_dir=slot["working_dir"], container=None, command=[slot["6"]], checkpoint=checkpoint)
            assert text.count(_ENV_LINE) == 1, "the template's env loop is not one export line per variable"
            parts: list[str | list[str]] = []
            for at, piece in enumerate(text.split(_ENV_LINE)):
                if at:
                    parts.append(["env"])
                last = 0
                for found in _MARKED.finditer(piece):
                    parts.append(piece[last:found.start()])
                    parts.append([found.group(1)])
                    last = found.end()
                parts.append(piece[last:])
            shapes[_key(env_script, checkpoint)] = [part for part in parts if part != ""]
    return {"template_sha256": _digest(), "shapes": shapes}


def _digest() -> str:
    return sha256_hex(TEMPLATE.read_bytes())


@functools.cache
def _stored() -> dict[str, Any] | None:
    """The stored shapes, if they were made from the template as it is."""
    try:
        stored = json.loads(STORED.read_text())
    except (OSError, ValueError):
        return None
    return stored["shapes"] if stored.get("template_sha256") == _digest() else None


def skeleton(shell: str, working_dir: str, env_script: str | None, env: tuple[tuple[str, str], ...],
             checkpoint: bool) -> tuple[tuple[str, int], ...] | None:
    """The wrapper of jobs with these settings as text parts and the numbers of the job's own values between them
    (-1: text); None when no stored shape fits the template (render it with jinja)."""
    shapes = _stored()
    if shapes is None:
        return None
    values = {"shell": quote(shell), "working_dir": quote(working_dir),
              "env_script": quote(env_script) if env_script else "",
              "env": "".join(f"export {name}={quote(value)}\n" for name, value in env)}
    parts: list[tuple[str, int]] = []
    text = ""
    for part in shapes[_key(bool(env_script), checkpoint)]:
        if isinstance(part, str):
            text += part
        elif part[0] in values:
            text += values[part[0]]
        else:
            parts.append((text, -1))
            parts.append(("", int(part[0])))
            text = ""
    parts.append((text, -1))
    return tuple(parts)


if __name__ == "__main__":
    sys.stdout.write(json.dumps(generate(), indent=1) + "\n")
