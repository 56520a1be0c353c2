"""joblib on any batch system: ``import b2batch.joblib`` registers the joblib backend ``b2batch``.

::

    import b2batch.joblib
    from joblib import Parallel, delayed, parallel_config

    with parallel_config(backend="b2batch", n_jobs=-1, batch_system="slurm", request_memory="1Gb"):
        results = Parallel()(delayed(f)(i) for i in range(10_000))

Code written for joblib-htcondor runs unchanged after :func:`register_htcondor` (or with the shim package
``joblib_htcondor``, ``compat/joblib-htcondor-shim``). Modules: :mod:`~b2batch.joblib.backend` (joblib's
protocol), :mod:`~b2batch.joblib.call_batch` (the jobs of one call), :mod:`~b2batch.joblib.parallel_run` (their settings,
progress and report), :mod:`~b2batch.joblib.options` (the parameters), :mod:`~b2batch.joblib.batches_on_node` (the job
side), :mod:`~b2batch.joblib.register`. See docs/joblib.md.
"""

from b2batch.joblib.backend import B2BatchBackend, NestingError
from b2batch.joblib.register import HTCondorBackend, register, register_htcondor

register()

__all__ = ["B2BatchBackend", "HTCondorBackend", "NestingError", "register", "register_htcondor"]
