"""``b2luigi.contrib.gbasf2``: ``Gbasf2Process`` (b2luigi 1.3's place of it), which explains that gbasf2 is
not available outside Belle II's grid."""

from b2luigi.batch.processes.gbasf2 import Gbasf2Process

__all__ = ["Gbasf2Process"]
