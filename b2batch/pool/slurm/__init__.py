"""pypoolparty's ``slurm`` module: ``Pool`` (chunks of tasks, a job each) and ``array.Pool`` (job arrays)."""

from b2batch.pool.aliases import SlurmPool as Pool
from b2batch.pool.slurm import array  # noqa: E402  (pypoolparty.slurm.array)

__all__ = ["Pool", "array"]
