"""``import b2batch`` re-exports its API explicitly: luigi's public names, b2batch's own, each resolvable."""

from __future__ import annotations

import subprocess
import sys

import luigi

import b2batch


def test_every_public_name_of_luigi_is_offered() -> None:
    missing = set(luigi.__all__) - set(b2batch.__all__)
    assert not missing, f"add these to b2batch/__init__.py: {sorted(missing)}"


def test_every_listed_name_resolves_and_parameters_have_path_options() -> None:
    for name in b2batch.__all__:
        assert getattr(b2batch, name) is not None, name
    assert b2batch.IntParameter is not luigi.IntParameter and issubclass(b2batch.IntParameter, luigi.IntParameter)
    assert b2batch.IntParameter(hashed=True).hashed
    assert b2batch.Event is luigi.Event and b2batch.build is luigi.build
    assert callable(b2batch.dispatch) and callable(b2batch.process)
    assert b2batch.task.Task is b2batch.Task  # luigi's name ``task`` is b2batch's own task module


def test_names_are_loaded_when_used_and_submodules_do_not_shadow_them() -> None:
    code = ("import sys, b2batch; import b2batch.luigi_frontend.dispatching, b2batch.engine; "
            "print('luigi' in sys.modules, callable(b2batch.dispatch), b2batch.Task.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True", "b2batch.luigi_frontend.task"]
    done = subprocess.run([sys.executable, "-c", "import sys, b2batch.emulators; print('luigi' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_pilot_and_a_unit_of_calls_import_none_of_the_steering_side() -> None:
    """What every pilot imports on a node (its worker, a unit of calls, a Pool's chunk runner) loads no run, batch
    system, job-script template, settings, executor or pool: the package ``__init__`` files import their names
    when first used."""
    code = ("import sys, b2batch.engine.pilots.node_worker, b2batch.calls.calls_on_node, b2batch.engine.files, "
            "b2batch.pool.chunk_on_node; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(('b2batch.engine.run', 'b2batch.systems', "
            "'b2batch.jobscript.templating', 'b2batch.settings', 'b2batch.calls.executor', 'b2batch.pool.pool', "
            "'b2batch.pool.dispatch', 'b2batch.engine.pilots.shaping_system', 'jinja2', 'luigi')))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == []
    from b2batch.calls import Executor, pickling
    from b2batch.engine import Job, Run

    assert Executor.__module__ == "b2batch.calls.executor" and pickling.__name__ == "b2batch.calls.pickling"
    assert Job.__module__ == "b2batch.engine.job" and Run.__module__ == "b2batch.engine.run"


def test_the_farm_command_starts_without_luigi() -> None:
    """``b2batch farm`` (PyTaskFarmer's drop-in) is started once per farm or pilot: it builds its own parser only,
    without the other commands' imports (luigi, the inspection commands)."""
    code = ("import contextlib, io, sys\nfrom b2batch.__main__ import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
            "    main(['farm', '--help'])\n"
            "print('luigi' in sys.modules, 'usage: b2batch farm' in out.getvalue())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
