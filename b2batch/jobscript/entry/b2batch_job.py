"""Node-side entry point of a b2batch job: ``<executable> b2batch_job.py <job.json>`` runs one task, a
worker job (pilot or bundle) of units, or one unit of another front-end.

It is a file, not a module, so that any executable that runs Python scripts can run it. Its folder holds
nothing else, so nothing here shadows the user's modules.
"""

import json
import sys
from pathlib import Path

if __name__ == "__main__":
    del sys.path[0]
    try:
        import b2batch
    except ImportError:  # b2batch used from a source checkout that is not installed
        sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    spec = json.loads(Path(sys.argv[1]).read_text())
    # The job's peak RSS (its own and its children's) for the wrapper's usage.json, written as the job ends.
    import atexit
    import resource

    def _peak_rss(folder: Path = Path(sys.argv[1]).parent) -> None:
        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        try:
            (folder / "peak_rss").write_text(f"{peak * 1024}\n")  # ru_maxrss: KiB on Linux
        except OSError:
            pass

    atexit.register(_peak_rss)
    if ("worker" in spec or "unit" in spec) and spec.get("frontend") != "luigi":
        import b2batch.engine.pilots.node_worker

        sys.exit(b2batch.engine.pilots.node_worker.main(sys.argv[1:]))
    from b2batch.luigi_frontend.job_luigi import import_luigi

    import_luigi()  # without the HTTP client of luigi's RPC module: a job talks to no luigi scheduler
    import b2batch.luigi_frontend.task_on_node

    sys.exit(b2batch.luigi_frontend.task_on_node.main(sys.argv[1:]))
