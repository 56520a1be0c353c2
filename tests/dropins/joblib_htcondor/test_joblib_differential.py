"""The joblib backend beside the real joblib-htcondor 0.2.3 (issue 26 Must have 3).

joblib-htcondor needs HTCondor's daemons, which cannot run here. So: the parameters it accepts and their
defaults, read from its installed package (its venv, tests/peers/install.sh), against ours, where a difference
not in the table of docs/joblib.md ("Differences the differential tests find") fails; and the code examples
of its README, read from the installed package's metadata and run unchanged through the shim
(``import joblib_htcondor``) under ``b2batch emulate htcondor``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from peers import peer_python

DOCS = Path(__file__).resolve().parents[3] / "docs" / "joblib.md"

INTROSPECT = '''\
import importlib.metadata, inspect, json, warnings
warnings.simplefilter("ignore")
import joblib_htcondor
from joblib_htcondor import backend

def described(signature):
    return {name: ("<required>" if p.default is inspect.Parameter.empty else repr(p.default))
            for name, p in signature.parameters.items()
            if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}

print(json.dumps({
    "backend": described(inspect.signature(backend._HTCondorBackend.__init__)),
    "register_htcondor": described(inspect.signature(joblib_htcondor.register_htcondor)),
    "readme": importlib.metadata.metadata("joblib_htcondor").get_payload(),
}))
'''


@pytest.fixture(scope="module")
def theirs() -> dict:
    done = subprocess.run([str(peer_python("joblib-htcondor")), "-c", INTROSPECT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def documented_differences() -> set[str]:
    section = DOCS.read_text().split("## Differences the differential tests find", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.MULTILINE))


def ours() -> dict[str, dict[str, str]]:
    from b2batch.joblib import options, register_htcondor
    from b2batch.joblib.backend import PARAMETERS

    defaults = {}
    for field in dataclasses.fields(options.Options):
        if field.name in PARAMETERS:
            value = field.default if field.default is not dataclasses.MISSING else field.default_factory()
            defaults[field.name] = repr(value)
    register = {name: repr(p.default) for name, p in inspect.signature(register_htcondor).parameters.items()}
    return {"backend": defaults, "register_htcondor": register}


def test_every_parameter_of_joblib_htcondor_is_taken_and_each_other_default_is_documented(theirs: dict) -> None:
    mine = ours()
    found = set()
    for what in ("backend", "register_htcondor"):
        missing = set(theirs[what]) - set(mine[what])
        assert not missing, f"{what}: joblib-htcondor's {sorted(missing)} are not taken"
        for name, default in theirs[what].items():
            if default != mine[what][name]:
                found.add(f"default-{name}".replace("_", "-"))
    assert found <= documented_differences(), (found - documented_differences(), theirs, mine)
    # and every parameter is accepted by the shim's backend as joblib-htcondor's users write it
    from joblib import parallel_config

    import joblib_htcondor

    joblib_htcondor.register_htcondor("WARNING")
    values = {"request_cpus": 1, "request_memory": "1Gb", "pool": None, "schedd": None, "universe": "vanilla",
              "python_path": sys.executable, "request_disk": "1GB", "initial_dir": ".", "log_dir_prefix": None,
              "poll_interval": 5, "shared_data_dir": None, "delete_task_file_on_load": False,
              "extra_directives": {"Requirements": 'Arch == "x86_64"'}, "worker_log_level": 20, "throttle": [10, 100],
              "batch_size": 1, "max_recursion_level": 1, "export_metadata": False, "context_func": None}
    assert set(values) == set(theirs["backend"])
    with parallel_config(backend="htcondor", n_jobs=-1, **values):
        pass


def readme_examples(readme: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", readme, re.DOTALL)


@pytest.mark.slow
def test_the_readme_examples_run_unchanged_under_the_htcondor_emulator(theirs: dict, tmp_path: Path) -> None:
    examples = readme_examples(theirs["readme"])
    assert len(examples) == 2 and "register_htcondor()" in examples[0], examples
    script = "\n".join(examples)  # as a user puts them one after the other
    (tmp_path / "unchanged.py").write_text(script)
    # The same with the value printed (only a print added), to check it.
    last = script.rstrip().splitlines()[-1]
    (tmp_path / "printed.py").write_text(script.rstrip()[: -len(last)] + f"  print('RESULT', {last.strip()})\n")
    env = clean_env(B2BATCH_EMULATOR_DIR=str(tmp_path / "emulator"), B2BATCH_EMULATOR_SLOTS="4")
    for name in ("unchanged.py", "printed.py"):
        done = subprocess.run([sys.executable, "-m", "b2batch", "emulate", "htcondor", "--", sys.executable, name],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT [-1, -2, -3, -4, -5]" in done.stdout, done.stdout
    assert (tmp_path / "joblib_htcondor_shared_data").is_dir(), "joblib-htcondor's default shared_data_dir"
    assert not list((tmp_path / "joblib_htcondor_shared_data").iterdir()), "each call's folder is removed"
