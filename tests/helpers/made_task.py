"""A luigi task for front-end tests that judge a task's job without running one: ``Made(n)`` writes one output."""

from __future__ import annotations

from pathlib import Path

import b2batch


class Made(b2batch.Task):
    n = b2batch.IntParameter()
    batch_system = "local"

    def output(self):
        yield self.add_to_output("made.txt")

    def run(self):
        Path(self.get_output_file_name("made.txt")).write_text("made")
