"""Passwords the local stack generates once and keeps under the state directory (0600).

An environment variable wins over the file (`CHANGELAKE_PG_PASSWORD`,
`CHANGELAKE_DEBEZIUM_PASSWORD`), which is how docker compose hands them in. Nothing here is ever
written to the repository.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from changelake.settings import Settings

ENV_NAMES = {
    "pg_password": "CHANGELAKE_PG_PASSWORD",
    "debezium_password": "CHANGELAKE_DEBEZIUM_PASSWORD",
}


def _path(settings: Settings, name: str) -> Path:
    return settings.secrets_dir / name


def ensure_secret(settings: Settings, name: str) -> str:
    """Return the secret, generating and storing it on first use."""
    if value := os.environ.get(ENV_NAMES[name]):
        return value
    path = _path(settings, name)
    if not path.exists():
        settings.secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(24))
    return path.read_text().strip()


def read_secret(settings: Settings, name: str) -> str | None:
    """The secret if the environment or the state directory has it; never generates one."""
    if value := os.environ.get(ENV_NAMES[name]):
        return value
    path = _path(settings, name)
    return path.read_text().strip() if path.exists() else None
