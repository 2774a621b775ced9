"""Errors of the local stack: each names the service and, where there is one, its log."""

from __future__ import annotations

from pathlib import Path

from changelake.exceptions import ChangelakeError


class ServiceError(ChangelakeError):
    def __init__(
        self,
        service: str,
        message: str,
        *,
        hint: str | None = None,
        log: Path | None = None,
        log_tail: str | None = None,
    ) -> None:
        text = f"{service}: {message}"
        if log is not None:
            text += f"\n  log: {log}"
        if log_tail:
            indented = "\n".join(f"    | {line}" for line in log_tail.splitlines())
            text += f"\n  last lines of the log:\n{indented}"
        super().__init__(text, hint)
        self.service = service


class NotInstalledError(ChangelakeError):
    """A vendored service or tool is missing: `make setup` fetches it."""
