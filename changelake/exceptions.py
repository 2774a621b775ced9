"""The root of every error changelake shows a user.

Each error says what is wrong, where (file, field, service, log) and what to do; the CLI prints
`str(error)` and exits non-zero, never a traceback.
"""

from __future__ import annotations


class ChangelakeError(Exception):
    """Something the user can act on. `hint` says what to do next."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  → {self.hint}"


class ConfigError(ChangelakeError):
    """Bad settings or configuration files: final, retrying will not help."""


class RetryableError(ChangelakeError):
    """A service that may answer later (connection refused, 429, 5xx)."""


def first_line(exc: BaseException) -> str:
    """An error's first line (a driver's or a JVM's message goes on for pages), or its type."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
