"""The job script: what a batch system runs for a job, and the files it runs with.

- :mod:`~b2batch.jobscript.templating`: the jinja templates (``templates/``: the executable wrapper, HTCondor's
  submit file, the array dispatch script), the one shell quoting of values written into them, and the
  node-side entry point (``entry/b2batch_job.py``) every wrapper runs; it reads no settings, so the batch
  systems render their submit files with it;
- :mod:`~b2batch.jobscript.containers`: the command line that runs a job inside a container;
- :mod:`~b2batch.jobscript.wrapper`: a job's executable wrapper from its settings (``executable``, ``env``,
  ``env_script``, ``working_dir``, ``shell``, the container), given to a run as ``RunConfig.job_wrapper``;
  ``write_job_script()`` is where front-ends write a job's spec and wrapper: they hand it the unit (the spec)
  or a command, and the settings of the job's owner.
"""
