"""pypoolparty's ``slurm.array``: ``Pool``, each task an element of a Slurm job array."""

from b2batch.pool.aliases import SlurmArrayPool as Pool

__all__ = ["Pool"]
