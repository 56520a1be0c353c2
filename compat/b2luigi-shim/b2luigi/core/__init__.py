"""``b2luigi.core``."""
