"""The errors b2batch raises: each names what went wrong, where, and how to fix it."""

from __future__ import annotations


class B2BatchError(Exception):
    """Base class of all b2batch errors."""


class StoppedBySignal(KeyboardInterrupt):
    """A run was stopped by a signal (Ctrl-C's SIGINT, SIGTERM from ``timeout``, ``kill`` or a CI runner, SIGHUP
    from a closed terminal or ending shell); ``signal_name`` names it. A KeyboardInterrupt, so that code that
    cleans up after Ctrl-C does so after the others too."""

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        try:
            self.signal_name = signal.Signals(signum).name
        except ValueError:
            self.signal_name = f"signal {signum}"
        super().__init__(self.signal_name)


class SettingError(B2BatchError, ValueError):
    """A setting is missing, unknown or has a value that cannot be used."""


class OutputPathError(B2BatchError, ValueError):
    """A task's output path cannot be built from its parameters."""


class BatchSystemError(B2BatchError):
    """A batch system could not be used: unknown, unreachable, or it rejected a job."""


class RunStoppingError(BatchSystemError):
    """The batch system refuses every job of this run (HTCondor never runs jobs owned by root): the run stops
    at once with this one message, submitting nothing more."""


class SchedulerCommandError(BatchSystemError):
    """A scheduler command failed; carries the command, exit code and output."""

    def __init__(self, command: list[str], returncode: int | None, stdout: str, stderr: str,
                 hint: str = "") -> None:
        self.command = command
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        import shlex

        code = "timed out" if self.returncode is None else f"exited with {self.returncode}"
        text = f"Command `{shlex.join(self.command)}` {code}."
        if self.stdout.strip():
            text += f"\nstdout: {self.stdout.strip()[-2000:]}"
        if self.stderr.strip():
            text += f"\nstderr: {self.stderr.strip()[-2000:]}"
        if self.hint:
            text += f"\n{self.hint}"
        return text


class TransientCommandError(SchedulerCommandError):
    """A scheduler command failed in a way that may go away when tried again."""


class CommandNotFoundError(SchedulerCommandError):
    """A scheduler command could not be started: its program is not on PATH (exit status 127, as a shell
    says) or is not executable (126)."""

    def __str__(self) -> str:
        import shlex

        program = self.command[0]
        what = "is not on PATH" if self.returncode == 127 else "cannot be run (not executable)"
        text = f"{program} {what}: cannot run `{shlex.join(self.command)}`."
        return text + (f"\n{self.hint}" if self.hint else "")
