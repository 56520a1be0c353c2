"""Display: what a run shows and leaves behind (live progress, the end summary, the timeline and the JSON
report). It reads the run's record (:class:`b2batch.engine.RunRecord`) and nothing of luigi."""
