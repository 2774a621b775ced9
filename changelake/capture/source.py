"""The source database a connector file captures, as the CLI reaches it: host, port, database
and user from the file, with its `${env:NAME}` and `${file:PATH:KEY}` placeholders resolved as
Connect resolves them. The environment wins; the local stack's values (what it hands Connect)
fill in what the environment does not set. So the same file names the same database for
Connect, for `connectors apply`'s checks, and for every command that reads the source."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from changelake.exceptions import ConfigError
from changelake.secrets import ENV_NAMES, read_secret
from changelake.settings import Settings

# A connector config's settings that say where its source is and who reads it.
SOURCE_KEYS = (
    "database.hostname",
    "database.port",
    "database.dbname",
    "database.user",
    "database.password",
    "heartbeat.action.query",
)
_PLACEHOLDER = re.compile(r"\$\{(env|file):([^}]*)\}")


@dataclass(frozen=True)
class Source:
    host: str
    port: int
    dbname: str
    user: str
    password: str = field(repr=False)
    heartbeat_query: str = ""  # the connector's heartbeat.action.query: a write of its own

    def dsn(self) -> str:
        from psycopg.conninfo import make_conninfo  # psycopg: only when connecting

        return make_conninfo(
            host=self.host,
            port=self.port,
            dbname=self.dbname,
            user=self.user,
            password=self.password,
        )

    def where(self) -> str:
        return f"{self.host}:{self.port}/{self.dbname}"


def stack_environment(settings: Settings, generate: bool = False) -> dict[str, str]:
    """What the local stack hands Connect for connector files to read through `${env:…}` (the
    compose file sets the same names). `generate`: create the Debezium password if none is kept
    yet (the stack does, when it starts Connect); a check only reads it."""
    from changelake.secrets import ensure_secret

    password = (
        ensure_secret(settings, "debezium_password")
        if generate
        else read_secret(settings, "debezium_password")
    )
    env = {
        "CHANGELAKE_PG_HOST": settings.postgres_host,
        "CHANGELAKE_PG_PORT": str(settings.postgres_port),
        # LeanJsonConverter publishes schemas to Kafka itself (its config gets no worker's).
        "CHANGELAKE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
    }
    if password is not None:
        env[ENV_NAMES["debezium_password"]] = password
    return env


def resolve(value: str, env: Mapping[str, str], field: str) -> str:
    """`value` with its placeholders filled in; a ConfigError naming `field` and the variable or
    file when one cannot be."""

    def fill(match: re.Match[str]) -> str:
        kind, ref = match.group(1), match.group(2)
        if kind == "env":
            if ref not in env:
                raise ConfigError(
                    f"{field}: ${{env:{ref}}} is not set here, so the source database cannot "
                    "be reached",
                    f"set {ref} to the value Connect has",
                )
            return env[ref]
        path, _, key = ref.rpartition(":")
        return _property(Path(path), key, field)

    return _PLACEHOLDER.sub(fill, value)


def source_of(
    settings: Settings, config: Mapping[str, str], env: Mapping[str, str] | None = None
) -> Source:
    """The database a connector's config captures, reached as its own (least-privilege) user;
    placeholders filled from `env` (this process's environment by default)."""
    env = {**stack_environment(settings), **(os.environ if env is None else env)}
    where = "config"

    def value(key: str, default: str | None = None) -> str:
        raw = config.get(key, default)
        if raw is None:
            raise ConfigError(f"{where}.{key}: missing: the connector needs it")
        return resolve(raw, env, f"{where}.{key}")

    port = value("database.port", "5432")
    if not port.isdigit():
        raise ConfigError(f"{where}.database.port: {port!r} is not a port number")
    return Source(
        value("database.hostname"),
        int(port),
        value("database.dbname"),
        value("database.user"),
        value("database.password", ""),
        config.get("heartbeat.action.query", ""),
    )


def _property(path: Path, key: str, field: str) -> str:
    """`key` of the Java properties file at `path` (what Connect's FileConfigProvider reads)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(
            f"{field}: cannot read {path} ({exc.strerror}) to fill in ${{file:{path}:{key}}}"
        ) from exc
    for line in lines:
        name, sep, rest = line.partition("=")
        if sep and name.strip() == key and not name.lstrip().startswith(("#", "!")):
            return rest.strip()
    raise ConfigError(f"{field}: {path} has no key {key!r}")
