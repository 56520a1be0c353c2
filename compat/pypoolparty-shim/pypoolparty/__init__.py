"""``pypoolparty`` as b2batch's pools: ``pypoolparty.slurm.array.Pool``, ``pypoolparty.slurm.Pool`` and
``pypoolparty.sun_grid_engine.Pool`` are those of :mod:`b2batch.pool` (same arguments, same behaviour).

Installed by ``pip install ./compat/pypoolparty-shim``; it replaces the real pypoolparty, which must not be
installed beside it (both are the top-level package ``pypoolparty``).
"""

import sys

import b2batch.pool
from b2batch.pool import slurm, sun_grid_engine
from b2batch.pool.slurm import array

__version__ = "0.3.1+b2batch"

# ``import pypoolparty.slurm.array`` finds b2batch's modules under pypoolparty's names.
sys.modules[__name__ + ".slurm"] = slurm
sys.modules[__name__ + ".slurm.array"] = array
sys.modules[__name__ + ".sun_grid_engine"] = sun_grid_engine

Pool = b2batch.pool.Pool

__all__ = ["Pool", "slurm", "sun_grid_engine"]
