"""``b2luigi.core.executable.create_executable_wrapper`` through the shim writes b2batch's job wrapper (not
b2luigi's); with ``apptainer_image`` its container line keeps the command run inside the image one shell
word, so that nothing of it (``&&``, a parameter value) runs outside the container: the guard of b2luigi's
own ``TestApptainerWrapperQuoting``, asserted on b2batch's wrapper."""

from __future__ import annotations

import shlex
from pathlib import Path


def test_apptainer_line_of_the_wrapper_keeps_the_payload_one_word(b2luigi, tmp_path: Path) -> None:
    from b2luigi.core.executable import create_executable_wrapper

    class MyTask(b2luigi.Task):
        value = b2luigi.Parameter()

        def output(self):
            yield self.add_to_output("a.txt")

    (tmp_path / "env dir").mkdir()
    (tmp_path / "env dir" / "setup.sh").write_text("export A=1\n")
    b2luigi.set_setting("apptainer_image", "/img.sif")
    b2luigi.set_setting("env_script", str(tmp_path / "env dir" / "setup.sh"))
    wrapper = Path(create_executable_wrapper(MyTask(value="x && touch pwned")))
    assert wrapper.name == "executable_wrapper.sh"
    line = next(ln for ln in wrapper.read_text().splitlines() if ln.startswith("apptainer "))
    argv = shlex.split(line)
    assert argv[:2] == ["apptainer", "exec"] and "/img.sif" in argv
    script = argv[argv.index("-c") + 1]
    assert "exec \"$@\"" in script  # the command is the container shell's arguments, each its own word
    assert "&&" not in argv and str(tmp_path / "env dir" / "setup.sh") in argv
    assert "touch" not in argv and "pwned" not in argv  # the parameter's value is not split into words
