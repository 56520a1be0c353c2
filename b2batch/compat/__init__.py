"""Compatibility layers for code written against other packages' module paths (not imported by b2batch)."""
