"""Jobs in containers (b2batch.jobscript.containers): the command lines of apptainer, singularity, podman and docker
against golden files, hostile values that stay data, clear errors for bad settings, b2luigi's apptainer
settings and batch system against a fake ``apptainer`` that records its arguments and runs the command, and
real podman containers locally and on the real Slurm (tests/clusters/podman.sh prepares podman and its image).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import clean_env
from test_golden import _compare, _normalise

import b2batch
from b2batch.engine.jobconfig import NO_SETTINGS
from b2batch.settings.resolve import resolve_job_config
from b2batch.luigi_frontend.jobs import task_wrapper
from b2batch.jobscript import containers, templating, wrapper
from b2batch.errors import SettingError
from b2batch.luigi_frontend.task_outputs import task_files
from b2batch.settings import get_setting

ROOT = Path(__file__).resolve().parents[2]
PODMAN_SCRIPT = ROOT / "tests" / "clusters" / "podman.sh"
PODMAN_IMAGE = "localhost/b2batch-test:latest"
CANARY = "CANARY"

#: A fake apptainer (and singularity): records its arguments, then runs what follows the image (as
#: ``apptainer exec`` does, in the same environment).
FAKE_APPTAINER = f"""#!{sys.executable} -I
import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
image = os.environ["FAKE_IMAGE"]
at = next(i for i in range(len(argv) - 2) if argv[i] == image and argv[i + 2] == "-c")
with open(Path(__file__).with_name("calls.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": argv, "cwd": os.getcwd()}}) + "\\n")
os.execvp(argv[at + 1], argv[at + 1:])
"""


class Reconstruct(b2batch.Task):
    run_number = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("events.root")


def fake_engine(folder: Path, name: str = "apptainer") -> Path:
    folder.mkdir(exist_ok=True)
    fake = folder / name
    fake.write_text(FAKE_APPTAINER)
    fake.chmod(0o755)
    return fake


def render(task: b2batch.Task) -> str:
    return task_wrapper(task, task_files(task))


# --- golden command lines ------------------------------------------------------------------------------

@pytest.mark.parametrize("engine,image", [("apptainer", "/cvmfs/belle.cern.ch/images/belle2-base-el9"),
                                          ("singularity", "docker://almalinux:9"),
                                          ("podman", "localhost/analysis:1.0"),
                                          ("docker", "registry.example.org/analysis:1.0")])
def test_container_command_lines(engine: str, image: str, tmp_path: Path) -> None:
    (tmp_path / "setup.sh").write_text("export A=1\n")
    b2batch.set_setting("env_script", "setup.sh")
    b2batch.set_setting("env", {"OMP_NUM_THREADS": "1", "LABEL": "it's $HOME"})
    b2batch.set_setting("container", {"engine": engine, "image": image, "mounts": ["/cvmfs", "/data:/in:ro"],
                                      "options": "--cleanenv" if engine in ("apptainer", "singularity")
                                      else ["--cap-add=SYS_PTRACE"]})
    text = _normalise(render(Reconstruct(run_number=42)), tmp_path)
    text = (text.replace(str(templating.PACKAGE_FOLDER), "<B2BATCH>")
            .replace(f"--user={os.getuid()}:{os.getgid()}", "--user=<UID>:<GID>"))
    _compare(f"container_{engine}.sh", text)
    assert "python3 <ENTRY_POINT>" in text  # the image's Python unless `executable` says otherwise


def test_b2luigi_apptainer_settings_make_the_same_command_as_container(tmp_path: Path) -> None:
    task = Reconstruct(run_number=1)
    b2batch.set_setting("apptainer_image", "/images/el9.sif")
    b2batch.set_setting("apptainer_mounts", ["/cvmfs"])
    b2batch.set_setting("apptainer_additional_params", "--cleanenv --nv")
    b2batch.set_setting("apptainer_cmd", "singularity")
    via_b2luigi = render(task)
    for name in ("apptainer_image", "apptainer_mounts", "apptainer_additional_params", "apptainer_cmd"):
        b2batch.clear_setting(name)
    b2batch.set_setting("container", {"engine": "singularity", "image": "/images/el9.sif", "mounts": ["/cvmfs"],
                                      "options": ["--cleanenv", "--nv"]})
    assert render(task).replace("setting container", "setting apptainer_image") == via_b2luigi
    assert "singularity exec --bind=/cvmfs --bind=" in via_b2luigi


def test_mount_defaults_cover_what_the_job_needs_and_can_be_turned_off(tmp_path: Path) -> None:
    b2batch.set_setting("result_dir", str(tmp_path.parent / f"{tmp_path.name}-results"))
    b2batch.set_setting("container", {"engine": "apptainer", "image": "i.sif"})
    text = render(Reconstruct(run_number=1))
    for needed in (tmp_path, tmp_path.parent / f"{tmp_path.name}-results", templating.PACKAGE_FOLDER):
        assert f"--bind={needed} " in text
    assert f"--bind={tmp_path}/logs" not in text  # inside the working dir's mount
    assert (tmp_path.parent / f"{tmp_path.name}-results").is_dir()  # made, so that the mount works
    b2batch.set_setting("container", {"engine": "apptainer", "image": "i.sif", "mount_defaults": False})
    assert "--bind" not in render(Reconstruct(run_number=1))


def test_remote_result_dir_is_not_mounted(tmp_path: Path) -> None:
    b2batch.set_setting("result_dir", "root://eos.example.org//store/user/me")
    b2batch.set_setting("container", {"engine": "podman", "image": "img"})
    text = render(Reconstruct(run_number=1))
    assert "root:" not in text.split("podman run", 1)[1].split(" img ", 1)[0]


# --- hostile values ------------------------------------------------------------------------------------

HOSTILE = [f"$(touch {CANARY})", f"`touch {CANARY}`", f"'; touch {CANARY}; '", f"\"; touch {CANARY}; \"",
           f"a\ntouch {CANARY}", f"x && touch {CANARY} #"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_container_values_are_data(hostile: str, tmp_path: Path) -> None:
    """Image, mounts, options, executable folder and env values with shell syntax run nothing and arrive
    byte-exact at the engine and in the container."""
    fakes = tmp_path / f"bin {hostile.replace('/', '_')}"
    engine = fake_engine(fakes)
    image = tmp_path / f"image {hostile.replace('/', '_')}.sif"
    image.write_text("")
    mount = tmp_path / f"data {hostile.replace('/', '_')}"
    mount.mkdir()
    recorder = tmp_path / "record.py"
    recorder.write_text("import json, os, sys\n"
                        "open('record.json', 'w').write(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))\n")
    (tmp_path / "setup.sh").write_text("export FROM_SCRIPT=yes\n")
    b2batch.set_setting("env_script", "setup.sh")
    b2batch.set_setting("env", {"B2T_VALUE": hostile})
    b2batch.set_setting("container", {"engine": "apptainer", "image": str(image), "executable": str(engine),
                                      "mounts": [str(mount)], "options": ["--env-file", hostile]})
    task = Reconstruct(run_number=7)
    files = task_files(task)
    files.make_folders()
    files.write_wrapper(wrapper.render_job_wrapper(task, task.task_id, resolve_job_config(task), files,
                                                   [sys.executable, str(recorder), hostile]))
    done = subprocess.run(["bash", str(files.wrapper)], cwd=tmp_path, env=clean_env(FAKE_IMAGE=str(image)),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, files.stderr.read_text()
    assert not list(tmp_path.rglob(CANARY)) and not Path(CANARY).exists()
    call = json.loads((fakes / "calls.jsonl").read_text())
    assert call["argv"][:2] == ["exec", f"--bind={mount}"]
    assert call["argv"][call["argv"].index(str(image)) - 2:][:3] == ["--env-file", hostile, str(image)]
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["argv"] == [hostile]
    assert record["env"]["B2T_VALUE"] == hostile and record["env"]["FROM_SCRIPT"] == "yes"
    assert int(files.exit_code.read_text()) == 0


# --- errors --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,says", [
    ({"engine": "rkt", "image": "x"}, ["'rkt'", "apptainer, singularity, podman, docker"]),
    ({"image": "x"}, ["names no engine", "engine"]),
    ({"engine": "podman"}, ["names no image", "image"]),
    ({"engine": "podman", "image": ""}, ["names no image"]),
    ({"engine": "podman", "image": 3}, ["image must be a string"]),
    ({"engine": "podman", "image": "x", "mounts": 5}, ['"mounts" (5) must be a list', "/cvmfs"]),
    ({"engine": "podman", "image": "x", "mounts": ["/a", ""]}, ['"mounts" ([\'/a\', \'\']) must be a list']),
    ({"engine": "podman", "image": "x", "options": {"a": 1}}, ['"options" ({\'a\': 1}) must be a list']),
    ({"engine": "podman", "image": "x", "options": "'unclosed"}, ["not valid shell words"]),
    ({"engine": "podman", "image": "x", "mount_defaults": "yes"}, ["mount_defaults must be true or false"]),
    ({"engine": "podman", "image": "x", "executable": ["podman"]}, ["executable must be a string"]),
    ({"engine": "podman", "image": "x", "volumes": ["/a"]}, ["unknown key(s) 'volumes'", "Known keys", "mounts"]),
    (["podman", "x"], ["must be a dict"]),
])
def test_bad_container_settings_name_task_setting_value_and_fix(value: object, says: list[str]) -> None:
    task = Reconstruct(run_number=3)
    b2batch.set_setting("container", value)
    with pytest.raises(SettingError) as error:
        render(task)
    message = str(error.value)
    for text in [f"Task {task}", "'container'", *says]:
        assert text in message, message
    if isinstance(value, dict):
        assert repr(value) in message


def test_container_must_be_a_dict_of_the_settings_kind() -> None:
    b2batch.set_setting("container", 3)
    with pytest.raises(SettingError, match="'container' is 3.*must be a dict"):
        render(Reconstruct(run_number=3))


def test_apptainer_batch_system_needs_an_image_and_an_apptainer_engine() -> None:
    task = Reconstruct(run_number=3)
    b2batch.set_setting("batch_system", "apptainer")
    with pytest.raises(SettingError, match=r"Task Reconstruct.*batch_system 'apptainer'.*'apptainer_image' is not set"):
        render(task)
    b2batch.set_setting("container", {"engine": "docker", "image": "x"})
    with pytest.raises(SettingError, match="cannot run docker containers"):
        render(task)


def run_wrapper_of(task: b2batch.Task, tmp_path: Path, **env: str) -> tuple[int, str]:
    files = task_files(task)
    files.make_folders()
    files.write_wrapper(render(task))
    done = subprocess.run(["bash", str(files.wrapper)], cwd=tmp_path, env=clean_env(**env), timeout=60, check=False)
    return done.returncode, files.setup_failed.read_text() if files.setup_failed.exists() else ""


def test_engine_missing_on_the_node_is_a_setup_failure_that_says_what_to_do(tmp_path: Path) -> None:
    task = Reconstruct(run_number=4)
    b2batch.set_setting("container", {"engine": "podman", "image": "x", "executable": "/nowhere/podman"})
    code, reason = run_wrapper_of(task, tmp_path)
    assert code == 3
    for text in (task.task_id, "/nowhere/podman", "setting container", "not on PATH", "install podman"):
        assert text in reason, reason


def test_apptainer_image_missing_on_the_node_is_a_setup_failure(tmp_path: Path) -> None:
    fake = fake_engine(tmp_path / "bin")
    task = Reconstruct(run_number=5)
    b2batch.set_setting("apptainer_image", str(tmp_path / "missing.sif"))
    b2batch.set_setting("apptainer_cmd", str(fake))
    code, reason = run_wrapper_of(task, tmp_path)
    assert code == 3
    for text in (task.task_id, "missing.sif", "setting apptainer_image", "is not on"):
        assert text in reason, reason


def test_env_script_failing_in_the_container_is_a_setup_failure(tmp_path: Path) -> None:
    fake = fake_engine(tmp_path / "bin")
    (tmp_path / "image.sif").write_text("")
    (tmp_path / "setup.sh").write_text("false\n")
    b2batch.set_setting("env_script", "setup.sh")
    b2batch.set_setting("container", {"engine": "apptainer", "image": str(tmp_path / "image.sif"),
                                      "executable": str(fake)})
    code, reason = run_wrapper_of(Reconstruct(run_number=6), tmp_path, FAKE_IMAGE=str(tmp_path / "image.sif"))
    assert code == 3 and "sourcing env_script" in reason and "setup.sh" in reason


# --- b2luigi's apptainer batch system, with a fake apptainer ----------------------------------------------

WORKFLOW = textwrap.dedent("""
    import os, sys
    import b2batch as b2luigi

    class Sim(b2luigi.Task):
        seed = b2luigi.IntParameter()
        {attributes}

        def output(self):
            yield self.add_to_output("out.txt")

        def run(self):
            with open(self.get_output_file_name("out.txt"), "w") as f:
                f.write(" ".join([os.environ.get("FROM_SCRIPT", "-"), os.environ.get("LABEL", "-"),
                                  str(os.path.exists("/run/.containerenv"))]))

    class All(b2luigi.WrapperTask):
        def requires(self):
            for seed in range(3):
                yield Sim(seed=seed)

    if __name__ == "__main__":
        b2luigi.set_setting("env_script", "setup.sh")
        b2luigi.set_setting("env", {{"LABEL": "it's $HOME"}})
        {settings}
        b2luigi.process(All(), workers=3)
""")


def write_workflow(folder: Path, attributes: str = "", settings: str = "") -> Path:
    (folder / "setup.sh").write_text("export FROM_SCRIPT=sourced\n")
    script = folder / "containers_workflow.py"
    script.write_text(WORKFLOW.format(attributes=attributes, settings=settings))
    return script


def run_workflow(script: Path, *args: str, path: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    extra = {"PYTHONPATH": str(ROOT), **env}
    if path is not None:
        extra["PATH"] = f"{path}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run([sys.executable, str(script), "--batch", *args], cwd=script.parent, env=clean_env(**extra),
                          capture_output=True, text=True, timeout=240, check=False)


@pytest.mark.parametrize("how", ["name", "class"])
def test_apptainer_batch_system_runs_tasks_in_apptainer(how: str, tmp_path: Path) -> None:
    fake_engine(tmp_path / "bin")
    (tmp_path / "el9.sif").write_text("")
    if how == "name":
        script = write_workflow(tmp_path, settings='b2luigi.set_setting("batch_system", "apptainer")\n'
                                '    b2luigi.set_setting("apptainer_image", "el9.sif")\n'
                                '    b2luigi.set_setting("apptainer_mounts", ["/usr"])\n'
                                '    b2luigi.set_setting("apptainer_additional_params", "--cleanenv")')
    else:  # b2luigi's class, as a task attribute
        script = write_workflow(tmp_path, attributes="from b2luigi.batch.processes.apptainer import "
                                "ApptainerProcess as batch_system\n    apptainer_image = 'el9.sif'")
    done = run_workflow(script, path=tmp_path / "bin", FAKE_IMAGE="el9.sif")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # Importing b2luigi's module path chooses b2luigi's profile, whose result_dir is "." (docs/migrating.md).
    results = tmp_path if how == "class" else tmp_path / "results"
    for seed in range(3):
        assert (results / f"seed={seed}" / "out.txt").read_text() == "sourced it's $HOME False"
    calls = [json.loads(line) for line in (tmp_path / "bin" / "calls.jsonl").read_text().splitlines()]
    assert len(calls) == 3 and all(c["argv"][0] == "exec" and c["cwd"] == str(tmp_path) for c in calls), calls

    def mounted(argv: list[str]) -> bool:  # the folder, or one that holds it (b2luigi's scratch_dir is /tmp)
        binds = [Path(a.removeprefix("--bind=")) for a in argv if a.startswith("--bind=")]
        return any(tmp_path == b or b in tmp_path.parents for b in binds)
    assert all(mounted(c["argv"]) and f"--pwd={tmp_path}" in c["argv"] for c in calls), calls[0]["argv"]
    if how == "name":
        assert all(c["argv"][1] == "--bind=/usr" and "--cleanenv" in c["argv"] for c in calls)
        assert "apptainer" in done.stderr  # the summary names the batch system (none under b2luigi's profile)


def test_compat_module_path() -> None:
    from b2luigi.batch.processes.apptainer import ApptainerProcess
    from b2batch.systems import system_class
    from b2batch.systems.apptainer import ApptainerSystem

    # b2luigi's class (its process API) stands for b2batch's apptainer system on the engine
    assert ApptainerProcess.engine_system == ApptainerSystem.name == "apptainer"
    assert system_class("apptainer") is ApptainerSystem
    assert containers.wanted(NO_SETTINGS.replace(batch_system=ApptainerProcess))


# --- real podman ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def podman() -> None:
    """podman with its test image (tests/clusters/podman.sh start); skipped where podman cannot run, but in CI
    (CI set, where tests/run-all.sh set it up) its absence fails the tests."""
    if not shutil.which("podman") or subprocess.run(["bash", str(PODMAN_SCRIPT), "status"],
                                                    capture_output=True, check=False).returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("podman cannot run containers here: tests/run-all.sh runs tests/clusters/podman.sh start")
        pytest.skip("podman cannot run containers here (bash tests/clusters/podman.sh start)")


def podman_settings() -> str:
    """The image is a skeleton: the host's /usr and this Python are mounted read-only."""
    mounts = sorted({"/usr:/usr:ro", f"{sys.prefix}:{sys.prefix}:ro", f"{sys.base_prefix}:{sys.base_prefix}:ro"})
    container = {"engine": "podman", "image": PODMAN_IMAGE, "mounts": mounts}
    return (f'b2luigi.set_setting("container", {container!r})\n'
            f'    b2luigi.set_setting("executable", [{sys.executable!r}])')


@pytest.mark.slow
@pytest.mark.parametrize("system,more", [
    ("local", ""),
    pytest.param("slurm", "", marks=pytest.mark.slurm),
    pytest.param("slurm", 'b2luigi.set_setting("pilot_jobs", 1)', marks=pytest.mark.slurm),
])
def test_workflow_in_real_podman_containers(system: str, more: str, podman: None, request: pytest.FixtureRequest,
                                            tmp_path: Path) -> None:
    if system == "slurm":
        request.getfixturevalue("slurm")
    script = write_workflow(tmp_path, settings=f"{podman_settings()}\n    {more}")
    done = run_workflow(script, "--batch-system", system)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for seed in range(3):  # env_script sourced and env set inside, /run/.containerenv: podman's container
        assert (tmp_path / "results" / f"seed={seed}" / "out.txt").read_text() == "sourced it's $HOME True"


@pytest.mark.slow
def test_real_podman_missing_image_is_a_setup_failure(podman: None, tmp_path: Path) -> None:
    task = Reconstruct(run_number=9)
    b2batch.set_setting("container", {"engine": "podman", "image": "localhost/no-such-image:never",
                                      "options": ["--pull=never"]})
    code, reason = run_wrapper_of(task, tmp_path)
    assert code == 3 and "exit code 125" in reason and "no-such-image" in reason and task.task_id in reason
