"""``b2luigi.batch``."""
