"""pypoolparty's ``sun_grid_engine``: ``Pool``, chunks of tasks as Sun Grid Engine jobs."""

from b2batch.pool.aliases import SunGridEnginePool as Pool

__all__ = ["Pool"]
