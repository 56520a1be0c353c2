"""``b2luigi.contrib``: of b2luigi 1.3's integrations only ``contrib.gbasf2``'s name is here (it explains
that gbasf2 is not available); ``contrib.basf2`` and ``contrib.polars`` need Belle II's software."""
