"""b2luigi's ``on_temporary_files`` through the shim copies a task's inputs under ``scratch_dir`` before handing
their paths to ``run()`` (b2batch.luigi_frontend.staging), and removes the copies afterwards; b2batch's own
decorator reads inputs where they are. The differential script
``tests/dropins/b2luigi/differential/scripts/temporary_inputs.py`` compares the same with the real b2luigi 1.3.0."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import b2batch


def _tasks(api, decorator):
    class Producer(api.Task):
        name = api.Parameter()

        def output(self):
            yield self.add_to_output("input.txt")

        def run(self):
            with open(self.get_output_file_name("input.txt"), "w") as f:
                f.write(f"made by {self.name}\n")

    class Consumer(api.Task):
        seen: dict = {}
        fail = api.BoolParameter(default=False)

        def requires(self):
            return [Producer(name="a"), Producer(name="b")]

        def output(self):
            yield self.add_to_output("final.txt")

        @decorator
        def run(self):
            paths = self.get_input_file_names("input.txt")
            Consumer.seen.update(paths=paths, texts=[Path(p).read_text() for p in paths],
                                 everything=self.get_all_input_file_names())
            with open(self.get_output_file_name("final.txt"), "w") as f:
                f.write("done\n")
            if self.fail:
                raise ValueError("fails after reading")

    return Producer, Consumer


def _produce(Producer) -> list[str]:
    real = []
    for name in "ab":
        producer = Producer(name=name)
        producer.run()
        real.append(producer.get_output_file_name("input.txt"))
    return real


def test_b2luigi_inputs_are_copies_under_scratch_dir_removed_after_run(b2luigi, tmp_path: Path) -> None:
    b2luigi.set_setting("scratch_dir", str(tmp_path / "scratch"))
    Producer, Consumer = _tasks(b2luigi, b2luigi.on_temporary_files)
    real = _produce(Producer)
    task = Consumer()
    task.run()
    seen = Consumer.seen
    assert seen["texts"] == ["made by a\n", "made by b\n"]
    assert all(Path(p).parent.parent == tmp_path / "scratch" for p in seen["paths"])
    assert [Path(p).name.split("-luigi-tmp-")[0] for p in seen["paths"]] == ["input", "input"]
    assert seen["everything"] == [seen["paths"]]  # b2luigi 1.3.0: one list of copies per key
    assert not any(os.path.exists(p) for p in seen["paths"]) and os.listdir(tmp_path / "scratch") == []
    assert [Path(p).read_text() for p in real] == ["made by a\n", "made by b\n"]  # the inputs themselves stay
    assert Path(task.get_output_file_name("final.txt")).read_text() == "done\n"
    assert "get_input_file_names" not in vars(task)  # the task's own methods are back


def test_b2luigi_failing_run_leaves_neither_copies_nor_output(b2luigi, tmp_path: Path) -> None:
    b2luigi.set_setting("scratch_dir", str(tmp_path / "scratch"))
    Producer, Consumer = _tasks(b2luigi, b2luigi.on_temporary_files)
    _produce(Producer)
    task = Consumer(fail=True)
    with pytest.raises(ValueError):
        task.run()
    assert not any(os.path.exists(p) for p in Consumer.seen["paths"])
    assert not os.path.exists(task.get_output_file_name("final.txt"))
    assert "get_input_file_names" not in vars(task)


def test_b2luigi_inputs_false_and_the_context_manager(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core.temporary_wrapper import TemporaryFileContextManager

    Producer, Consumer = _tasks(b2luigi, b2luigi.on_temporary_files(inputs=False))
    real = _produce(Producer)
    Consumer().run()
    assert Consumer.seen["paths"] == real

    task = Consumer()
    with TemporaryFileContextManager(task, outputs=False):
        copies = task.get_input_file_names("input.txt")
        assert copies != real and [Path(p).read_text() for p in copies] == ["made by a\n", "made by b\n"]
        assert task.get_output_file_name("final.txt") == Consumer().get_output_file_name("final.txt")
    assert not any(os.path.exists(p) for p in copies)


def test_b2batch_reads_inputs_in_place(tmp_path: Path) -> None:
    Producer, Consumer = _tasks(b2batch, b2batch.on_temporary_files)
    real = _produce(Producer)
    Consumer().run()
    assert Consumer.seen["paths"] == real


def test_local_target_get_temporary_input_copies_a_file_or_a_folder(b2luigi, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("a")
    (tmp_path / "file.tar.gz").write_text("f")
    b2luigi.set_setting("scratch_dir", str(tmp_path / "scratch"))
    with b2luigi.LocalTarget(str(tmp_path / "file.tar.gz")).get_temporary_input() as copy:
        assert Path(copy).read_text() == "f" and Path(copy).name.startswith("file-luigi-tmp-")
        assert Path(copy).name.endswith(".tar.gz") and Path(copy).parent.parent == tmp_path / "scratch"
    assert not os.path.exists(copy)
    with b2luigi.LocalTarget(str(tmp_path / "data")).get_temporary_input() as copy:
        assert (Path(copy) / "a.txt").read_text() == "a"
    assert not os.path.exists(copy)
