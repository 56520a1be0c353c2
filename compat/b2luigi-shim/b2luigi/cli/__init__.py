"""``b2luigi.cli``: b2luigi 1.3's command line, ``b2luigi`` (the shim's console script,
``b2luigi.cli:main``): ``run``, ``show``, ``remove``, ``cleanup``, ``test``, ``tasks``,
``graph``, ``about``, ``init``, ``version``. Its modules are those of b2luigi (``b2luigi.cli.utils``,
``b2luigi.cli.runner``, ``b2luigi.cli.apps.show`` ...). The typer app is imported when first asked for
(``app``, ``main``), so that ``import b2luigi`` does not load typer. b2batch's own command is ``b2batch``."""

from typing import Any

#: The names of the ``command`` module offered here.
_COMMAND_NAMES = ("app", "main", "main_callback", "get_b2luigi_version", "about", "init", "version", "self_update",
                  "console", "_click_app")


def __getattr__(name: str) -> Any:
    if name in _COMMAND_NAMES:
        from b2luigi.cli import command

        return getattr(command, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
