"""Every port, path, version and default, declared once and overridable by the environment.

Versions of JVM artifacts live in pom.xml (the file `mvn` reads); this module reads them from there,
so the local stack, docker-compose.yml (checked by tests) and the code agree on one number each.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from changelake.exceptions import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parent
SLOT_LAG_WARN_VAR = "CHANGELAKE_SLOT_LAG_WARN_BYTES"
# What logical decoding needs of Postgres, for the local stack and docker-compose.yml alike (a
# test holds the compose file to these values).
POSTGRES_REPLICATION = {
    "wal_level": "logical",
    "max_replication_slots": "16",
    "max_wal_senders": "16",
    # A stuck or abandoned slot may hold back at most this much WAL; past it the slot is
    # invalidated (its connector then needs a new snapshot) instead of filling the disk.
    "max_slot_wal_keep_size": "2GB",
}
# The largest change record capture carries: a row of TOASTed values up to about this size (as
# Debezium's JSON). Kafka's own default is 1 MB, and one larger row failed the connector's task
# and so the capture of every table of its database. For the local stack and docker-compose.yml
# alike (a test holds the compose file to these values): the broker's message.max.bytes (topics
# inherit it), and Connect's producer, whose buffer must hold a whole record beside others.
MAX_RECORD_BYTES = 64 * 1024 * 1024
KAFKA_RECORD_LIMITS = {"message.max.bytes": str(MAX_RECORD_BYTES)}
CONNECT_RECORD_LIMITS = {
    "producer.max.request.size": str(MAX_RECORD_BYTES),
    "producer.buffer.memory": str(MAX_RECORD_BYTES + 32 * 1024 * 1024),  # Kafka's default + one
}
# Kafka Connect's internal topics: the local worker and the compose file name the same
# (tests/unit/test_compose.py); capture reads the offsets and status topics.
CONNECT_CONFIG_TOPIC = "changelake-connect-configs"
CONNECT_OFFSETS_TOPIC = "changelake-connect-offsets"
CONNECT_STATUS_TOPIC = "changelake-connect-status"
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def project_root() -> Path:
    """The checkout holding pom.xml, connectors/ and schemas/ (the package's parent when installed
    editable, else the working directory, as in the pipeline image)."""
    here = PACKAGE_DIR.parent
    return here if (here / "pom.xml").exists() else Path.cwd()


@dataclass(frozen=True)
class Versions:
    kafka: str
    debezium: str
    opensearch: str
    opensearch_secure: str
    spark: str
    delta: str
    postgres_major: str
    versitygw: str


def read_versions(pom: Path) -> Versions:
    try:
        props = ET.parse(pom).getroot().find("m:properties", _POM_NS)
    except (OSError, ET.ParseError) as exc:
        raise ConfigError(f"cannot read versions from {pom}: {exc}") from exc
    if props is None:
        raise ConfigError(f"{pom} has no <properties> section with the pinned versions")

    def prop(name: str) -> str:
        node = props.find(f"m:{name}", _POM_NS)
        if node is None or not (node.text or "").strip():
            raise ConfigError(f"{pom}: property <{name}> is missing")
        return (node.text or "").strip()

    return Versions(
        kafka=prop("kafka.version"),
        debezium=prop("debezium.version"),
        opensearch=prop("opensearch.version"),
        opensearch_secure=prop("opensearch.secure.version"),
        spark=prop("spark.version"),
        delta=prop("delta.version"),
        postgres_major=prop("postgres.major"),
        versitygw=prop("versitygw.version"),
    )


def _port(env: Mapping[str, str], name: str, default: int, off: bool = False) -> int:
    """A TCP port; `off`: 0 is allowed too, meaning none."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not (0 if off else 1) <= int(raw) < 65536:
        allowed = "0 for none, or 1-65535" if off else "1-65535"
        raise ConfigError(f"environment variable {name}={raw!r} is not a TCP port ({allowed})")
    return int(raw)


@dataclass(frozen=True)
class Settings:
    root: Path
    home: Path
    host: str
    postgres_port: int
    kafka_port: int
    kafka_controller_port: int
    connect_port: int
    opensearch_port: int
    opensearch_transport_port: int
    # A long `changelake run` serves queries on Spark Connect here, bound to
    # `spark_connect_bind` (loopback; the compose file's pipeline binds every interface and
    # publishes the port on the host's loopback), another port when this one is taken (see
    # serve/served.py). `spark_connect_token`: the token it expects ("": a new one each run,
    # given to queries in served.json; a container's run needs one its host's queries know).
    spark_connect_port: int
    spark_connect_bind: str
    spark_connect_token: str = field(repr=False)  # a secret: never in a traceback's repr
    # A streaming `changelake run` serves Prometheus metrics here (0: not at all), bound to
    # `metrics_bind` (loopback; the compose file's pipeline binds every interface).
    metrics_port: int
    metrics_bind: str
    service_user: str
    java_home: Path
    vendor: Path
    # Where clients reach each service. The local stack binds everything to `host`; under docker
    # compose the pipeline container reaches the others by service name.
    postgres_host: str
    kafka_host: str
    connect_host: str
    opensearch_host: str
    database: str = "shop"
    admin_user: str = "changelake"
    debezium_user: str = "debezium"
    publication: str = "changelake_shop"
    # Two cores and 24 GiB are shared by four services and Spark: keep every heap small.
    kafka_heap: str = "384m"
    connect_heap: str = "512m"
    opensearch_heap: str = "512m"
    # The pipeline: a Spark master URL (local by default, a cluster's URL runs the same job), and
    # where the derived tables and streaming checkpoints live (any Spark-supported path or URI).
    spark_master: str = "local[2]"
    spark_driver_memory: str = "2g"
    lake: str = ""
    checkpoints: str = ""
    # An S3-compatible server's URL for s3a:// lakes (empty: AWS's own endpoints). Its keys come
    # from the environment, never from here (changelake/spark.py: S3_KEY_VARIABLES).
    # OpenSearch with its security plugin on: https (CHANGELAKE_OPENSEARCH_TLS), verified against
    # this CA's certificate (PEM) if given, and a user (its password only from the environment:
    # CHANGELAKE_OPENSEARCH_PASSWORD, see search/client.py).
    opensearch_tls: bool = False
    opensearch_ca: Path | None = None
    opensearch_user: str = ""
    s3_endpoint: str = ""
    s3_region: str = ""  # empty: S3A finds an AWS bucket's region itself
    connectors_override: Path | None = None  # CHANGELAKE_CONNECTORS_DIR
    # The project's lake.json, search.json and views.json, when named (CHANGELAKE_LAKE_CONFIG,
    # CHANGELAKE_SEARCH_CONFIG, CHANGELAKE_VIEWS_CONFIG): a file named must exist; unnamed, the
    # project's schemas/ holds each or the project does without it.
    lake_config_override: Path | None = None
    search_config_override: Path | None = None
    views_config_override: Path | None = None
    # The project: its connectors/ and schemas/ (lake.json, search.json). The demo shop is the
    # checkout's own; `--project DIR` (CHANGELAKE_PROJECT) points at another.
    project: Path | None = None
    # How long a batch keeps retrying an unreachable or overloaded OpenSearch before it fails and
    # the run restarts it (CHANGELAKE_SEARCH_RETRY_SECONDS).
    search_retry_s: float = 600.0
    # How long a lean record whose schema fingerprint is not in the schemas topic is waited for
    # before its records become dead letters naming it (CHANGELAKE_SCHEMA_WAIT_SECONDS).
    schema_wait_s: float = 30.0
    # `status` warns about a replication slot holding more unconfirmed WAL than this: well before
    # Postgres invalidates it at max_slot_wal_keep_size (4GB locally, 2GB under docker compose).
    slot_lag_warn_bytes: int = 1 << 30
    # A replication slot that lost changes (dropped, invalidated, left behind by a failover) is
    # re-synced by the running pipeline with nobody asked (apply/resync.py); False
    # (CHANGELAKE_RESYNC=manual) leaves its tables stalled until a person acts.
    resync: bool = True

    @cached_property
    def versions(self) -> Versions:
        return read_versions(self.root / "pom.xml")

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def secrets_dir(self) -> Path:
        return self.home / "secrets"

    @property
    def project_dir(self) -> Path:
        return self.project or self.root

    @property
    def connectors_dir(self) -> Path:
        return self.connectors_override or self.project_dir / "connectors"

    @property
    def config_dir(self) -> Path:
        """Where the project's lake.json and search.json are (either may be absent)."""
        return self.project_dir / "schemas"

    @property
    def schemas_dir(self) -> Path:
        """The SQL changelake ships (shop.sql, capture.sql, changelake.sql)."""
        return self.root / "schemas"

    @property
    def postgres_bin(self) -> Path:
        return Path(f"/usr/lib/postgresql/{self.versions.postgres_major}/bin")

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.kafka_host}:{self.kafka_port}"

    @property
    def connect_url(self) -> str:
        return f"http://{self.connect_host}:{self.connect_port}"

    @property
    def opensearch_url(self) -> str:
        scheme = "https" if self.opensearch_tls else "http"
        return f"{scheme}://{self.opensearch_host}:{self.opensearch_port}"

    def postgres_dsn(self, user: str, password: str, database: str | None = None) -> str:
        db = database or self.database
        return f"postgresql://{user}:{password}@{self.postgres_host}:{self.postgres_port}/{db}"


DOTENV_PREFIX = "CHANGELAKE_"


def dotenv_defaults(folder: Path) -> dict[str, str]:
    """The CHANGELAKE_* settings of `folder`/.env (the file docker compose reads beside
    docker-compose.yml) that the environment does not set already: so the CLI on the host
    reaches a compose stack with its passwords and lake folder (a relative path is relative to the
    file's folder, as compose takes it). Other names in the file are compose's own."""
    from dotenv import dotenv_values

    found = dotenv_values(folder / ".env") if (folder / ".env").is_file() else {}
    return {
        name: str((folder / value).resolve()) if value.startswith(("./", "../")) else value
        for name, value in found.items()
        if name.startswith(DOTENV_PREFIX) and value is not None and name not in os.environ
    }


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read the environment once; everything else takes a Settings."""
    env = os.environ if env is None else env
    root = project_root()
    home = Path(env.get("CHANGELAKE_HOME") or root / ".changelake").resolve()
    host = env.get("CHANGELAKE_HOST") or "127.0.0.1"
    return Settings(
        root=root,
        home=home,
        host=host,
        postgres_host=env.get("CHANGELAKE_PG_HOST") or host,
        kafka_host=env.get("CHANGELAKE_KAFKA_HOST") or host,
        connect_host=env.get("CHANGELAKE_CONNECT_HOST") or host,
        opensearch_host=env.get("CHANGELAKE_OPENSEARCH_HOST") or host,
        vendor=Path(env.get("CHANGELAKE_VENDOR") or home / "vendor").resolve(),
        postgres_port=_port(env, "CHANGELAKE_PG_PORT", 5432),
        kafka_port=_port(env, "CHANGELAKE_KAFKA_PORT", 9092),
        kafka_controller_port=_port(env, "CHANGELAKE_KAFKA_CONTROLLER_PORT", 9093),
        connect_port=_port(env, "CHANGELAKE_CONNECT_PORT", 8083),
        opensearch_port=_port(env, "CHANGELAKE_OPENSEARCH_PORT", 9200),
        opensearch_transport_port=_port(env, "CHANGELAKE_OPENSEARCH_TRANSPORT_PORT", 9300),
        spark_connect_port=_port(env, "CHANGELAKE_SPARK_CONNECT_PORT", 15002),
        metrics_port=_port(env, "CHANGELAKE_METRICS_PORT", 9464, off=True),
        metrics_bind=env.get("CHANGELAKE_METRICS_BIND") or "127.0.0.1",
        spark_connect_bind=env.get("CHANGELAKE_SPARK_CONNECT_BIND") or "127.0.0.1",
        spark_connect_token=env.get("CHANGELAKE_SPARK_CONNECT_TOKEN") or "",
        service_user=env.get("CHANGELAKE_SERVICE_USER", "changelake"),
        java_home=Path(env.get("JAVA_HOME") or "/usr/lib/jvm/java-17-openjdk-amd64"),
        spark_master=env.get("CHANGELAKE_SPARK_MASTER") or "local[2]",
        spark_driver_memory=env.get("CHANGELAKE_SPARK_DRIVER_MEMORY") or "2g",
        lake=env.get("CHANGELAKE_LAKE") or str(home / "lake"),
        checkpoints=env.get("CHANGELAKE_CHECKPOINTS") or str(home / "checkpoints"),
        opensearch_tls=_flag(env, "CHANGELAKE_OPENSEARCH_TLS"),
        opensearch_ca=(
            Path(env["CHANGELAKE_OPENSEARCH_CA"]) if env.get("CHANGELAKE_OPENSEARCH_CA") else None
        ),
        opensearch_user=env.get("CHANGELAKE_OPENSEARCH_USER") or "",
        s3_endpoint=env.get("CHANGELAKE_S3_ENDPOINT") or "",
        s3_region=env.get("CHANGELAKE_S3_REGION") or env.get("AWS_REGION") or "",
        project=(
            Path(env["CHANGELAKE_PROJECT"]).resolve() if env.get("CHANGELAKE_PROJECT") else None
        ),
        lake_config_override=_path(env, "CHANGELAKE_LAKE_CONFIG"),
        search_config_override=_path(env, "CHANGELAKE_SEARCH_CONFIG"),
        views_config_override=_path(env, "CHANGELAKE_VIEWS_CONFIG"),
        connectors_override=_path(env, "CHANGELAKE_CONNECTORS_DIR"),
        search_retry_s=_seconds(env, "CHANGELAKE_SEARCH_RETRY_SECONDS", 600.0),
        schema_wait_s=_seconds(env, "CHANGELAKE_SCHEMA_WAIT_SECONDS", 30.0),
        slot_lag_warn_bytes=_byte_count(env, SLOT_LAG_WARN_VAR, 1 << 30),
        resync=_resync(env),
    )


def _resync(env: Mapping[str, str]) -> bool:
    text = (env.get("CHANGELAKE_RESYNC") or "auto").strip().lower()
    if text not in ("auto", "manual"):
        raise ConfigError(
            f"CHANGELAKE_RESYNC={text!r}: expected auto (re-sync a lost slot by itself) or manual"
        )
    return text == "auto"


def _path(env: Mapping[str, str], name: str) -> Path | None:
    return Path(env[name]) if env.get(name) else None


def _flag(env: Mapping[str, str], name: str) -> bool:
    text = (env.get(name) or "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{name}={env[name]!r}: expected true or false")


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ConfigError(f"{name}={text!r}: expected a number of seconds (0 or more)")
    return value


def _byte_count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    # isascii: str.isdigit also accepts digits such as "²" that int() refuses
    if not (raw.isascii() and raw.isdigit()):
        raise ConfigError(
            f"environment variable {name}={raw!r} is not a number of bytes"
            " (a whole number, 0 or more; 1073741824 is 1 GiB)"
        )
    return int(raw)
