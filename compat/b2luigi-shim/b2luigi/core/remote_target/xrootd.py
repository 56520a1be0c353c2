"""``b2luigi.core.remote_target.xrootd``: ``XRootDSystem`` and ``XRootDTarget``, b2batch's."""

from b2batch import XRootDSystem, XRootDTarget

__all__ = ["XRootDSystem", "XRootDTarget"]
