"""What a job's process loads before its task runs: luigi without the HTTP client of its RPC module (a job
talks to no luigi scheduler), and the task's own code still imports ``requests`` as usual. One job run by the
node-side entry point, as a batch system runs it (no cluster, no workflow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from b2batch.jobscript.wrapper import ENTRY_POINT

TASKS = textwrap.dedent('''
    import json, sys
    import b2batch

    class Looks(b2batch.Task):
        def output(self):
            yield self.add_to_output("seen.json")

        def run(self):
            import luigi.rpc
            seen = {"requests_loaded": "requests" in sys.modules, "modules": len(sys.modules),
                    "rpc_has_requests": luigi.rpc.HAS_REQUESTS}
            import requests  # the task's own import of it works
            seen["session"] = requests.Session.__name__
            with open(self.get_output_file_name("seen.json"), "w") as f:
                json.dump(seen, f)
''')

STEERING = textwrap.dedent('''
    import sys
    sys.path.insert(0, ".")
    import jobtasks
    from b2batch.luigi_frontend.task_job_files import write_task_job_files
    task = jobtasks.Looks()
    files = write_task_job_files(task)
    print(files.path_of("spec"))
    print(task.get_output_file_name("seen.json"))
    print("requests" in sys.modules)
''')


def test_a_luigi_job_runs_its_task_without_the_rpc_clients_http_library(tmp_path: Path) -> None:
    (tmp_path / "jobtasks.py").write_text(TASKS)
    steering = subprocess.run([sys.executable, "-c", STEERING], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=True)
    spec, output, steering_has_requests = steering.stdout.split()
    assert steering_has_requests == "True"  # the steering process imports luigi as it is (luigid's client)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)  # the task's module
    job = subprocess.run([sys.executable, str(ENTRY_POINT), spec], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": path}, check=False)
    assert job.returncode == 0, job.stderr[-3000:]
    seen = json.loads(Path(output).read_text())
    assert seen["requests_loaded"] is False and seen["rpc_has_requests"] is False, seen
    assert seen["session"] == "Session", seen
