"""Pilot jobs and bundles: many units of work per batch job."""
