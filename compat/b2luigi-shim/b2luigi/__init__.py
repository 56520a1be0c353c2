"""``b2luigi``, played by b2batch: ``import b2luigi`` gives b2batch's API, and b2luigi's module paths
(``b2luigi.core.utils``, ``b2luigi.core.settings``, ``b2luigi.batch.processes`` ...) give the modules of
``b2batch.compat.b2luigi``. Importing it chooses b2luigi 1.3's defaults for the process (the settings
profile ``b2luigi``), and ``b2luigi.get_setting`` answers as b2luigi's does. Not installed with b2batch:
``pip install ./compat/b2luigi-shim``.
"""

from typing import Any

import b2batch
from b2batch import *  # noqa: F401,F403
from b2batch import __all__, __version__  # noqa: F401
from b2batch.compat.b2luigi import install_aliases
from b2batch.compat.b2luigi.cli.process import build  # noqa: F401  (warns that process() is meant)
from b2batch.compat.b2luigi.core.settings import get_setting  # noqa: F401  (b2luigi's signature and answers)
from b2batch.compat.b2luigi.core.settings import _setting_file_iterator  # noqa: F401  (b2luigi exports it)


#: b2luigi's WebDAV classes, through webdavclient3 when it is installed (b2luigi.core.remote_target.webdav);
#: looked up when first asked for, as that client takes a while to import.
_WEBDAV = ("WebDAVSystem", "WebDAVTarget")
for _name in _WEBDAV:
    globals().pop(_name, None)


def __getattr__(name: str) -> Any:
    """Anything else of b2batch's (looked up when asked for, so that later b2batch names are there too)."""
    if name in _WEBDAV:
        from b2batch.compat.b2luigi.core.remote_target import webdav

        return getattr(webdav, name)
    return getattr(b2batch, name)


install_aliases(__name__)
