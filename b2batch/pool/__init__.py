"""``multiprocessing.Pool`` on a batch system, and pypoolparty's pools on b2batch's engine.

- :class:`~b2batch.pool.pool.Pool` (``b2batch.Pool``): ``map``, ``starmap``, ``imap``, ``imap_unordered``,
  ``apply_async``, ``map_async`` with ``multiprocessing.Pool``'s semantics, on every batch system of b2batch.
- ``b2batch.pool.slurm.array.Pool``, ``b2batch.pool.slurm.Pool``, ``b2batch.pool.sun_grid_engine.Pool``:
  pypoolparty's class paths, constructor arguments and documented behaviour (:mod:`b2batch.pool.aliases`).

Modules: ``pool`` (the Pool), ``results`` (AsyncResult, MapResult, the imap iterators), ``dispatch`` (chunks
to jobs and back), ``runner`` (what a job runs), ``packing`` (the work dir stays small), ``environment``
(what of the caller's environment the jobs get).
"""

from b2batch.pool.dispatch import PoolJobLostError, PoolTerminatedError
from b2batch.pool.pool import Pool
from b2batch.pool.results import AsyncResult, ItemIterator, MapResult
from b2batch.pool.chunk_on_node import UnpicklableResultError
from b2batch.pool import slurm, sun_grid_engine  # noqa: E402  (pypoolparty's class paths)

__all__ = ["AsyncResult", "ItemIterator", "MapResult", "Pool", "PoolJobLostError", "PoolTerminatedError",
           "UnpicklableResultError", "slurm", "sun_grid_engine"]
