"""``b2luigi.core.remote_target.webdav``: ``WebDAVSystem`` and ``WebDAVTarget``, b2batch's."""

from b2batch.remote.webdav import WebDAVSystem, WebDAVTarget

__all__ = ["WebDAVSystem", "WebDAVTarget"]
