"""The ``b2luigi`` command as a file of its own (:mod:`.b2luigi_command`), alone in its folder: a job puts the
folder of the file it runs on ``sys.path``, where no other module may shadow one of the same name."""
