"""The luigi front-end: luigi tasks become engine jobs.

- :mod:`~b2batch.luigi_frontend.workflow`: ``process()``, the flags, dry run, outputs, removal;
- :mod:`~b2batch.luigi_frontend.graph_runner`: b2batch's graph runner (linear in the graph's size);
- :mod:`~b2batch.luigi_frontend.jobs`: a task's job files and what an ended job means for it;
- :mod:`~b2batch.luigi_frontend.batch_process`: b2luigi's ``BatchProcess`` plugin interface;
- :mod:`~b2batch.luigi_frontend.task_on_node`: the node side of a job;
- :mod:`~b2batch.luigi_frontend.seam`: every private name of luigi b2batch uses (nowhere else).
"""
