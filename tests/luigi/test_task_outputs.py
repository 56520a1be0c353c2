"""b2batch's public API, the output helpers of its tasks, the output layout and on_temporary_files, checked
with real files and real (local, in-process) luigi runs."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import ClassVar

import luigi
import pytest
from conftest import tree

import b2batch
from b2batch.errors import OutputPathError


def build(*tasks: luigi.Task) -> luigi.LuigiStatusCode:
    result = luigi.build(list(tasks), local_scheduler=True, workers=1, detailed_summary=True, log_level="WARNING")
    return result.status


def write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


# --- the public API ---------------------------------------------------------------------------------------

def test_luigi_public_api_is_offered() -> None:
    missing = [name for name in luigi.__all__ if not hasattr(b2batch, name)]
    assert not missing
    assert set(luigi.__all__) <= set(b2batch.__all__)


@pytest.mark.parametrize("name", ["Task", "ExternalTask", "WrapperTask", "LocalTarget", "requires", "inherits",
                                  "on_temporary_files", "get_setting", "set_setting", "clear_setting", "process"])
def test_b2luigi_api_is_offered(name: str) -> None:
    assert name in b2batch.__all__
    assert callable(getattr(b2batch, name))


def test_task_classes_are_luigi_task_classes_with_helpers() -> None:
    for ours, theirs in ((b2batch.Task, luigi.Task), (b2batch.ExternalTask, luigi.ExternalTask),
                         (b2batch.WrapperTask, luigi.WrapperTask), (b2batch.LocalTarget, luigi.LocalTarget)):
        assert issubclass(ours, theirs) and ours is not theirs
    for helper in ("add_to_output", "get_output_file_name", "get_input_file_names", "get_input_file_name",
                   "get_input_file_names_from_dict", "get_all_input_file_names", "get_all_output_file_names",
                   "remove_output"):
        for cls in (b2batch.Task, b2batch.ExternalTask, b2batch.WrapperTask):
            assert callable(getattr(cls, helper))


def test_every_luigi_parameter_class_takes_hashed_and_hidden() -> None:
    for name in ("Parameter", "IntParameter", "FloatParameter", "BoolParameter", "DateParameter",
                 "ListParameter", "DictParameter", "EnumParameter", "ChoiceParameter", "PathParameter"):
        ours = getattr(b2batch, name)
        assert ours is not getattr(luigi, name) and issubclass(ours, getattr(luigi, name))
    param = b2batch.IntParameter(default=1, hashed=True, hidden=True, significant=True)
    assert (param.hashed, param.hidden) == (True, True)
    assert (b2batch.Parameter().hashed, b2batch.Parameter().hidden) == (False, False)


def test_b2luigi_style_workflow_runs(workflow) -> None:
    """A workflow written for b2luigi (``import b2batch as b2luigi``) runs unchanged."""
    flow = workflow("b2luigi_style.py")
    done = flow.run()
    assert done.returncode == 0, done.stderr
    results = flow.folder / "results"
    assert (results / "energy=10" / "seed=1" / "sim.txt").read_text() == "10 1 from-settings"
    assert (results / "energy=10" / "reco.txt").read_text() == "10 1\n10 2"
    assert (results / "summary.txt").read_text() == "2 inputs"


# --- the output layout --------------------------------------------------------------------------------------

class Layout(b2batch.Task):
    energy = b2batch.FloatParameter()
    run_name = b2batch.Parameter()
    seed = b2batch.IntParameter(default=3)

    def output(self):
        yield self.add_to_output("out.txt")


def test_outputs_are_laid_out_by_parameters_in_declared_order(tmp_path: Path) -> None:
    task = Layout(energy=1.5, run_name="mc", seed=7)
    [(key, target)] = task.add_to_output("out.txt").items()
    assert key == "out.txt"
    assert isinstance(target, b2batch.LocalTarget)
    expected = tmp_path / "results" / "energy=1.5" / "run_name=mc" / "seed=7" / "out.txt"
    assert Path(target.path) == expected
    assert task.get_output_file_name("out.txt") == str(expected)
    assert list(task.get_all_output_file_names()) == [str(expected)]
    assert expected.parent.is_dir()  # get_output_file_name makes the folder; the file comes from run()


def test_absolute_and_relative_result_dir(tmp_path: Path) -> None:
    b2batch.set_setting("result_dir", str(tmp_path / "abs"))
    assert Layout(energy=1.5, run_name="x").get_output_file_name("out.txt") == \
        str(tmp_path / "abs" / "energy=1.5" / "run_name=x" / "seed=3" / "out.txt")
    b2batch.set_setting("result_dir", "rel/dir")
    assert Layout(energy=1, run_name="x").get_output_file_name("out.txt").startswith(str(tmp_path / "rel" / "dir"))


def test_result_dir_of_the_task_wins() -> None:
    class OwnDir(b2batch.Task):
        result_dir = "own"

        def output(self):
            yield self.add_to_output("f")

    b2batch.set_setting("result_dir", "global")
    assert "/own/f" in OwnDir().get_output_file_name("f")


def test_separator_and_parameter_names_settings(tmp_path: Path) -> None:
    task = Layout(energy=2.0, run_name="a", seed=1)
    b2batch.set_setting("parameter_separator", "-")
    assert Path(task.get_output_file_name("out.txt")).relative_to(tmp_path / "results").parts == \
        ("energy-2.0", "run_name-a", "seed-1", "out.txt")
    b2batch.set_setting("use_parameter_name_in_output", False)
    assert Path(task.get_output_file_name("out.txt")).relative_to(tmp_path / "results").parts == \
        ("2.0", "a", "1", "out.txt")


def test_hashed_and_hidden_parameters(tmp_path: Path) -> None:
    class Options(b2batch.Task):
        shown = b2batch.IntParameter()
        files = b2batch.ListParameter(hashed=True)
        path = b2batch.Parameter(hidden=True)
        debug = b2batch.BoolParameter(default=False, significant=False)

        def output(self):
            yield self.add_to_output("o")

    task = Options(shown=1, files=["/data/a.root", "/data/b.root"], path="/some/where", debug=True)
    serialized = Options.files.serialize(task.files)
    digest = hashlib.md5(serialized.encode()).hexdigest()
    assert Path(task.get_output_file_name("o")).relative_to(tmp_path / "results").parts == \
        ("shown=1", f"files=hashed_{digest}", "o")
    other = Options(shown=1, files=["/data/a.root"], path="/some/where")
    assert other.get_output_file_name("o") != task.get_output_file_name("o")


def test_value_with_path_separator_is_a_clear_error() -> None:
    with pytest.raises(OutputPathError) as error:
        Layout(energy=1, run_name="runs/7").get_output_file_name("out.txt")
    message = str(error.value)
    assert "'run_name'" in message and "'runs/7'" in message and "Layout" in message
    assert "hashed=True" in message and "hidden=True" in message


@pytest.mark.parametrize("value", [".", ".."])
def test_dot_folders_without_parameter_names_are_a_clear_error(value: str) -> None:
    b2batch.set_setting("use_parameter_name_in_output", False)
    with pytest.raises(OutputPathError) as error:
        Layout(energy=1.0, run_name=value).get_output_file_name("out.txt")
    assert f"the value {value!r} of parameter 'run_name'" in str(error.value)
    b2batch.clear_setting("use_parameter_name_in_output")
    path = Layout(energy=1.0, run_name=value).get_output_file_name("out.txt")
    assert path.endswith(f"/run_name={value}/seed=3/out.txt")


def test_get_output_file_name_of_unknown_key_lists_the_outputs() -> None:
    with pytest.raises(KeyError, match="out.txt"):
        Layout(energy=1, run_name="a").get_output_file_name("nope")


# --- inputs ----------------------------------------------------------------------------------------------

class Producer(b2batch.Task):
    n = b2batch.IntParameter()

    def output(self):
        yield self.add_to_output("data.txt")
        yield self.add_to_output(f"only{self.n}.txt")

    def run(self):
        for key in ("data.txt", f"only{self.n}.txt"):
            write(self.get_output_file_name(key), f"{self.n}")


class ListConsumer(b2batch.Task):
    def requires(self):
        return [Producer(n=1), Producer(n=2)]

    def output(self):
        return [self.add_to_output("summary.txt")]  # a list of dicts works as well as a generator

    def run(self):
        data = self.get_input_file_names("data.txt")
        single = self.get_input_file_name("only2.txt")
        everything = sorted(self.get_all_input_file_names())
        write(self.get_output_file_name("summary.txt"),
              "\n".join([*data, single, "--", *everything, "--", *sorted(self.get_input_file_names())]))


def test_input_helpers_in_a_real_run(tmp_path: Path) -> None:
    assert build(ListConsumer()) == luigi.LuigiStatusCode.SUCCESS
    results = tmp_path / "results"
    data = [str(results / f"n={n}" / "data.txt") for n in (1, 2)]
    only = [str(results / f"n={n}" / f"only{n}.txt") for n in (1, 2)]
    lines = (results / "summary.txt").read_text().split("\n")
    assert lines == [*data, only[1], "--", *sorted(data + only), "--", "data.txt", "only1.txt", "only2.txt"]


def test_get_input_file_names_gives_lists_per_key() -> None:
    build(ListConsumer())
    consumer = ListConsumer()
    inputs = consumer.get_input_file_names()
    assert {key: len(value) for key, value in inputs.items()} == {"data.txt": 2, "only1.txt": 1, "only2.txt": 1}
    with pytest.raises(ValueError, match="2 inputs named 'data.txt'"):
        consumer.get_input_file_name("data.txt")
    with pytest.raises(KeyError, match="data.txt"):
        consumer.get_input_file_names("missing.txt")


class DictConsumer(b2batch.Task):
    def requires(self):
        return {"first": Producer(n=1), "second": [Producer(n=1), Producer(n=2)]}

    def output(self):
        yield self.add_to_output("dict.txt")

    def run(self):
        first = self.get_input_file_names_from_dict("first")
        second = self.get_input_file_names_from_dict("second", "data.txt")
        write(self.get_output_file_name("dict.txt"), repr((first, second)))


def test_get_input_file_names_from_dict(tmp_path: Path) -> None:
    assert build(DictConsumer()) == luigi.LuigiStatusCode.SUCCESS
    first, second = eval((tmp_path / "results" / "dict.txt").read_text())
    results = tmp_path / "results"
    assert first == {"data.txt": [str(results / "n=1" / "data.txt")], "only1.txt": [str(results / "n=1" / "only1.txt")]}
    assert second == [str(results / "n=1" / "data.txt"), str(results / "n=2" / "data.txt")]


def test_external_task_outputs() -> None:
    class Raw(b2batch.ExternalTask):
        name = b2batch.Parameter()

        def output(self):
            yield self.add_to_output("raw.dat")

    raw = Raw(name="x")
    assert not raw.complete()
    Path(raw.get_output_file_name("raw.dat")).write_text("raw")
    assert raw.complete()


# --- remove_output ---------------------------------------------------------------------------------------

def test_remove_output_removes_files_and_folders(tmp_path: Path) -> None:
    class Mixed(b2batch.Task):
        def output(self):
            yield self.add_to_output("file.txt")
            yield self.add_to_output("folder")
            yield self.add_to_output("never-made.txt")

        def run(self):
            write(self.get_output_file_name("file.txt"), "f")
            folder = Path(self.get_output_file_name("folder"))
            (folder / "deep").mkdir(parents=True)
            (folder / "deep" / "x").write_text("x")

    task = Mixed()
    build(task)
    (tmp_path / "results" / "unrelated.txt").write_text("keep")
    assert tree(tmp_path / "results") == ["file.txt", "folder/deep/x", "unrelated.txt"]
    task.remove_output()
    assert tree(tmp_path / "results") == ["unrelated.txt"]
    task.remove_output()  # nothing left to remove: no error


# --- requires and inherits ---------------------------------------------------------------------------------

class Base(b2batch.Task):
    energy = b2batch.IntParameter()
    seed = b2batch.IntParameter(default=0)

    def output(self):
        yield self.add_to_output("base.txt")

    def run(self):
        write(self.get_output_file_name("base.txt"), f"{self.energy} {self.seed}")


@b2batch.requires(Base, seed=5)
class FixedSeed(b2batch.Task):
    def output(self):
        yield self.add_to_output("fixed.txt")

    def run(self):
        write(self.get_output_file_name("fixed.txt"), self.get_input_file_name("base.txt"))


@b2batch.inherits(Base, without="seed")
class Merge(b2batch.Task):
    def requires(self):
        for seed in (1, 2):
            yield self.clone(Base, seed=seed)

    def output(self):
        yield self.add_to_output("merged.txt")

    def run(self):
        write(self.get_output_file_name("merged.txt"), "|".join(self.get_input_file_names("base.txt")))


def test_requires_with_fixed_parameters(tmp_path: Path) -> None:
    assert sorted(name for name, _ in FixedSeed.get_params()) == ["energy"]
    assert build(FixedSeed(energy=3)) == luigi.LuigiStatusCode.SUCCESS
    base = tmp_path / "results" / "energy=3" / "seed=5" / "base.txt"
    assert base.read_text() == "3 5"
    assert (tmp_path / "results" / "energy=3" / "fixed.txt").read_text() == str(base)


def test_inherits_without(tmp_path: Path) -> None:
    assert sorted(name for name, _ in Merge.get_params()) == ["energy"]
    assert build(Merge(energy=4)) == luigi.LuigiStatusCode.SUCCESS
    merged = (tmp_path / "results" / "energy=4" / "merged.txt").read_text().split("|")
    assert merged == [str(tmp_path / "results" / "energy=4" / f"seed={s}" / "base.txt") for s in (1, 2)]


def test_requires_of_several_tasks() -> None:
    class Other(b2batch.Task):
        flavour = b2batch.Parameter()

    @b2batch.requires(Base, Other)
    class Both(b2batch.Task):
        pass

    both = Both(energy=1, flavour="up")
    assert [type(t) for t in both.requires()] == [Base, Other]
    assert [t.param_kwargs for t in both.requires()] == [{"energy": 1, "seed": 0}, {"flavour": "up"}]


# --- on_temporary_files ----------------------------------------------------------------------------------

class Atomic(b2batch.Task):
    fail = b2batch.BoolParameter(default=False, hidden=True)
    seen: ClassVar[list[str]] = []

    def output(self):
        yield self.add_to_output("a.txt")
        yield self.add_to_output("dir")

    @b2batch.on_temporary_files
    def run(self):
        a = self.get_output_file_name("a.txt")
        folder = Path(self.get_output_file_name("dir"))
        Atomic.seen[:] = [a, str(folder)]
        write(a, "partial")
        assert not Path(self.output_path("a.txt")).exists()  # the final path stays untouched while running
        folder.mkdir()
        (folder / "inside").write_text("in")
        if self.fail:
            raise RuntimeError("task failed half-way")
        write(a, "complete")

    def output_path(self, key: str) -> str:
        return next(iter(self.add_to_output(key).values())).path


def test_on_temporary_files_moves_outputs_into_place(tmp_path: Path) -> None:
    task = Atomic()
    assert build(task) == luigi.LuigiStatusCode.SUCCESS
    temporary_a, temporary_dir = Atomic.seen
    assert temporary_a != task.output_path("a.txt")
    assert tree(tmp_path / "results") == ["a.txt", "dir/inside"]
    assert (tmp_path / "results" / "a.txt").read_text() == "complete"
    assert not Path(temporary_a).exists() and not Path(temporary_dir).exists()
    assert task.get_output_file_name("a.txt") == task.output_path("a.txt")  # outside run(): the final path


def test_on_temporary_files_leaves_nothing_when_the_task_raises(tmp_path: Path) -> None:
    task = Atomic(fail=True)
    assert build(task) == luigi.LuigiStatusCode.FAILED
    assert Atomic.seen  # it ran
    results = tmp_path / "results"
    assert list(results.rglob("*")) == []  # no output, no temporary file or folder


def test_on_temporary_files_with_scratch_dir(tmp_path: Path) -> None:
    b2batch.set_setting("scratch_dir", str(tmp_path / "scratch"))
    assert build(Atomic()) == luigi.LuigiStatusCode.SUCCESS
    assert all(Path(p).parent.parent == tmp_path / "scratch" for p in Atomic.seen)  # a folder each, as b2luigi
    assert tree(tmp_path / "results") == ["a.txt", "dir/inside"]
    assert tree(tmp_path / "scratch") == []
    Atomic().remove_output()
    assert build(Atomic(fail=True)) == luigi.LuigiStatusCode.FAILED
    assert tree(tmp_path / "results") == []
    assert tree(tmp_path / "scratch") == []


def test_on_temporary_files_replaces_an_old_output_folder(tmp_path: Path) -> None:
    task = Atomic()
    old = Path(task.output_path("dir"))
    old.mkdir(parents=True)
    (old / "stale").write_text("old")
    Atomic().run()
    assert tree(tmp_path / "results") == ["a.txt", "dir/inside"]


# --- plain luigi targets (tasks written for luigi, or outputs not made with add_to_output) --------------------

class RawData(b2batch.ExternalTask):
    def output(self):
        return luigi.LocalTarget(str(Path.cwd() / "raw" / "events.dat"))


class PlainLuigi(luigi.Task):
    def output(self):
        return [luigi.LocalTarget(str(Path.cwd() / "plain" / name)) for name in ("a.txt", "b.txt")]


class UsesPlainTargets(b2batch.Task):
    def requires(self):
        return [RawData(), PlainLuigi()]

    def output(self):
        return {"listed": [luigi.LocalTarget(str(Path.cwd() / "mine" / "x")),
                           luigi.LocalTarget(str(Path.cwd() / "mine" / "y"))]}


class UsesPlainTargetsByName(b2batch.Task):
    def requires(self):
        return {"raw": RawData(), "plain": PlainLuigi()}


def test_bare_targets_are_keyed_by_their_file_name_like_b2luigi(tmp_path: Path) -> None:
    task = UsesPlainTargets()
    assert task.get_input_file_names("events.dat") == [str(tmp_path / "raw" / "events.dat")]
    assert task.get_input_file_name("b.txt") == str(tmp_path / "plain" / "b.txt")
    assert sorted(task.get_all_input_file_names()) == [str(tmp_path / "plain" / "a.txt"),
                                                       str(tmp_path / "plain" / "b.txt"),
                                                       str(tmp_path / "raw" / "events.dat")]


def test_targets_under_a_dict_key_are_keyed_by_it(tmp_path: Path) -> None:
    task = UsesPlainTargets()
    assert task.get_output_file_name("listed") == str(tmp_path / "mine" / "x")
    assert list(task.get_all_output_file_names()) == [str(tmp_path / "mine" / "x"), str(tmp_path / "mine" / "y")]
    by_name = UsesPlainTargetsByName()
    assert by_name.get_input_file_names() == {"raw": [str(tmp_path / "raw" / "events.dat")],
                                              "plain": [str(tmp_path / "plain" / "a.txt"),
                                                        str(tmp_path / "plain" / "b.txt")]}
    assert by_name.get_input_file_names_from_dict("raw") == {"events.dat": [str(tmp_path / "raw" / "events.dat")]}
    assert by_name.get_input_file_names_from_dict("plain", "b.txt") == [str(tmp_path / "plain" / "b.txt")]


def test_remove_output_removes_bare_targets_too(tmp_path: Path) -> None:
    raw = RawData()
    path = Path(raw.output().path)
    path.parent.mkdir()
    path.write_text("data")
    raw.remove_output()
    assert not path.exists()


# --- the parameter cache ------------------------------------------------------------------------------------

def test_parameters_are_found_once_per_class_and_again_after_a_change(monkeypatch) -> None:
    calls = []
    original = luigi.Task.get_params.__func__

    def counting(cls):
        calls.append(cls.__name__)
        return original(cls)

    monkeypatch.setattr(luigi.Task, "get_params", classmethod(counting))

    class Cached(b2batch.Task):
        a = b2batch.IntParameter(default=1)

    for i in range(50):
        Cached(a=i).task_id, Cached(a=i).to_str_params()
    assert calls.count("Cached") == 1

    added = b2batch.Parameter(default="x")
    added.__set_name__(Cached, "b")
    Cached.b = added  # a parameter added after the class was made (as inherits/requires do)
    assert [name for name, _ in Cached.get_params()] == ["a", "b"]
    assert Cached(a=1).to_str_params() == {"a": "1", "b": "x"}

    @b2batch.inherits(Cached)
    class Child(b2batch.Task):
        c = b2batch.Parameter(default="y")

    assert [name for name, _ in Child.get_params()] == ["a", "b", "c"]
    del Cached.b
    assert [name for name, _ in Cached.get_params()] == ["a"]
    Cached.not_a_parameter = 3  # other attributes do not empty the cache
    before = calls.count("Cached")
    Cached.get_params()
    assert calls.count("Cached") == before


def test_base_dir_follows_the_workflow_script(tmp_path, monkeypatch) -> None:
    import sys
    import types

    from b2batch.jobscript import base_folder

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "flow.py").write_text("")
    monkeypatch.delenv(base_folder.BASE_DIR_VARIABLE)  # no base folder named: the script's
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    main.__file__ = str(tmp_path / "one" / "flow.py")
    assert base_folder.base_dir() == tmp_path / "one"
    main.__file__ = str(tmp_path / "two" / "flow.py")
    assert base_folder.base_dir() == tmp_path / "two"
    monkeypatch.chdir(tmp_path / "one")
    main.__file__ = "flow.py"  # relative: against the working directory
    assert base_folder.base_dir() == tmp_path / "one"
    monkeypatch.chdir(tmp_path / "two")
    assert base_folder.base_dir() == tmp_path / "two"
