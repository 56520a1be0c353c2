"""``b2luigi.cli.apps``: the typer apps of the subcommands, one module each."""
