"""``b2luigi.cli``: the command line of workflow scripts. ``b2luigi``'s own command is ``b2batch`` here
(``b2batch show|tasks|graph|remove|cleanup|run WORKFLOW.py``)."""
