"""``multiprocessing.Pool`` on a batch system, and pypoolparty's pools on b2batch's engine.

- :class:`~b2batch.pool.pool.Pool` (``b2batch.Pool``): ``map``, ``starmap``, ``imap``, ``imap_unordered``,
  ``apply_async``, ``map_async`` with ``multiprocessing.Pool``'s semantics, on every batch system of b2batch.
- ``b2batch.pool.slurm.array.Pool``, ``b2batch.pool.slurm.Pool``, ``b2batch.pool.sun_grid_engine.Pool``:
  pypoolparty's class paths, constructor arguments and documented behaviour (:mod:`b2batch.pool.aliases`).

Modules: ``pool`` (the Pool), ``results`` (AsyncResult, MapResult, the imap iterators), ``dispatch`` (chunks
to jobs and back), ``runner`` (what a job runs), ``packing`` (the work dir stays small), ``environment``
(what of the caller's environment the jobs get).
"""

from b2batch.lazy_names import lazy_names

# Imported when first used: a pilot that imports the chunks' runner (``b2batch.pool.chunk_on_node``) on a node
# does not import the pool, the executor and the engine's steering with it (~60 ms of every pilot's start).
_MODULE_OF = {"PoolJobLostError": "b2batch.pool.dispatch", "PoolTerminatedError": "b2batch.pool.dispatch",
              "Pool": "b2batch.pool.pool", "AsyncResult": "b2batch.pool.results",
              "ItemIterator": "b2batch.pool.results", "MapResult": "b2batch.pool.results",
              "UnpicklableResultError": "b2batch.pool.chunk_on_node"}
_SUBMODULES = {"slurm": "b2batch.pool.slurm", "sun_grid_engine": "b2batch.pool.sun_grid_engine"}
__getattr__, __dir__ = lazy_names(__name__, globals(), _MODULE_OF, _SUBMODULES)

__all__ = ["AsyncResult", "ItemIterator", "MapResult", "Pool", "PoolJobLostError", "PoolTerminatedError",
           "UnpicklableResultError", "slurm", "sun_grid_engine"]
