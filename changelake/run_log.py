"""`changelake run`'s lines through `logging`: each with its time and level, on standard output
as before, so a log collector can filter them and a reader can tell when a table stopped.

The run's parts say their lines through a plain `Callable[[str], None]` (tests pass a list's
`append`, other commands `print`); a line that is not routine is a `Leveled` string, which any of
those takes as text and `say` logs at its level.
"""

from __future__ import annotations

import logging
import sys

LOGGER = logging.getLogger("changelake.run")
FORMAT = "%(asctime)s %(levelname)-7s %(message)s"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
# What FORMAT puts before a line's text, for readers of a run's output (the bench).
PREFIX = r"(?:\S+ +(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +)?"


class Leveled(str):
    """A line with a level other than INFO; to anything but `say`, just its text."""

    level: int

    def __new__(cls, text: str, level: int) -> Leveled:
        line = super().__new__(cls, text)
        line.level = level
        return line


def warning(text: str) -> str:
    """Something went wrong and is being handled: a retry, a re-send, a skipped re-read."""
    return Leveled(text, logging.WARNING)


def error(text: str) -> str:
    """Something needs a person: a table stopped."""
    return Leveled(text, logging.ERROR)


class _CurrentStdout(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stdout` is when a line is logged: a command run in-process (the
    test suite's `changelake_here`) has its output captured by swapping it."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def configure() -> None:
    """Once per process: INFO and above, timestamped, to standard output; the modules' own
    loggers (`changelake.*`, such as the served views' warnings) the same way."""
    for logger in (LOGGER, logging.getLogger("changelake")):
        if not any(isinstance(h, _CurrentStdout) for h in logger.handlers):
            handler = _CurrentStdout()
            handler.setFormatter(logging.Formatter(FORMAT, TIME_FORMAT))
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def say(line: str) -> None:
    LOGGER.log(getattr(line, "level", logging.INFO), line)
