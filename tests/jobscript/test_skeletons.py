"""The job wrapper put together without jinja (b2batch.jobscript.skeletons) is the template's rendering."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from b2batch.jobscript import skeletons, wrapper


def test_the_stored_shapes_are_the_templates() -> None:
    stored = json.loads(skeletons.STORED.read_text())
    assert stored == skeletons.generate(), ("the job wrapper's template changed: make its shapes again with "
                                            "python -m b2batch.jobscript.skeletons > " + str(skeletons.STORED))


def test_a_wrapper_put_together_from_strings_is_the_rendered_one() -> None:
    slots = tuple(f"{wrapper._SLOT}{i}" for i in range(7))
    envs = [(), (("A", "1"),), (("A", "it's $(not run) `either`"), ("B_2", ""), ("C", "a\nb"))]
    settings = itertools.product(["bash", "/bin/sh"], ["/plain", "/a b/'q'", "/x;rm -rf y"],
                                 [None, "/s/e nv.sh", "/s/it's.sh"], envs, [False, True])
    for shell, working_dir, env_script, env, checkpoint in settings:
        parts = skeletons.skeleton(shell, working_dir, env_script, env, checkpoint)
        assert parts is not None
        ahead = "".join(text if slot < 0 else slots[slot] for text, slot in parts)
        rendered = wrapper._render(shell, slots[:6], env_script, env, working_dir, None, [slots[6]], checkpoint)
        assert ahead == rendered, (shell, working_dir, env_script, env, checkpoint)


#: Modules a local Pool's steering process does without (issue 44: its start is most of a short map's time):
#: jinja (wrappers put together from their shapes), psutil (a start time read from /proc), socket (the host's
#: name from os.uname), subprocess (forked jobs), multiprocessing's pool (its error class made when used), difflib
#: (misspelt names only), statistics (a median of few samples) and the container module (jobs in a container only).
NOT_IMPORTED = ("jinja2", "psutil", "socket", "subprocess", "multiprocessing.pool", "difflib", "statistics",
                "datetime", "hashlib",
                "b2batch.jobscript.containers")


#: Modules a local pilot and its units do without (what its zygote loads before it forks the first pilot is on
#: the way to a Pool's first chunk): subprocess (only a Slurm pilot asks squeue for its allocation's end) and
#: datetime (a unit's first line takes the time from the time module).
NOT_IMPORTED_IN_PILOTS = ("subprocess", "datetime", "jinja2", "socket")


@pytest.mark.slow
def test_a_local_pool_imports_none_of_what_it_does_not_need() -> None:
    script = ("import sys, b2batch\n"
              "def f(x): return x\n"
              f"def pilots(x): return [m for m in {NOT_IMPORTED_IN_PILOTS!r} if m in sys.modules]\n"
              "if __name__ == '__main__':\n"
              "    with b2batch.Pool(batch_system='local', verbose=False) as pool:\n"
              "        assert pool.map(f, range(3)) == [0, 1, 2]\n"
              "        in_pilots = pool.map(pilots, [0])[0]\n"
              f"    print([m for m in {NOT_IMPORTED!r} if m in sys.modules], in_pilots)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[] []"
