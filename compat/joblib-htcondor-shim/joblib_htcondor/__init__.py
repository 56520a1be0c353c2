"""joblib-htcondor's entry point on b2batch: ``from joblib_htcondor import register_htcondor`` then
``parallel_config(backend="htcondor", ...)`` runs the calls through b2batch's engine (on HTCondor by default,
any batch system with ``batch_system=...``). Installed only on request: ``pip install ./compat/joblib-htcondor-shim``.
"""

from b2batch.joblib import HTCondorBackend, register_htcondor

__version__ = "0.1.0+b2batch"
__all__ = ["HTCondorBackend", "register_htcondor"]
