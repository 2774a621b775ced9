"""PostgreSQL from Debian's packages, as a local process: logical WAL, the demo database, and a
least-privilege role for Debezium."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg

from changelake.secrets import ensure_secret
from changelake.settings import POSTGRES_REPLICATION
from changelake.stack.service import Service


class Postgres(Service):
    name = "postgres"
    port_env = "CHANGELAKE_PG_PORT"
    start_timeout_s = 60.0
    # SIGTERM is a "smart" shutdown that waits for every client (Debezium's replication connection
    # among them); SIGINT is the fast shutdown that still checkpoints cleanly.
    stop_signal = signal.SIGINT

    @property
    def port(self) -> int:
        return self.settings.postgres_port

    @property
    def data(self) -> Path:
        return self.dir / "data"

    def bin(self, tool: str) -> str:
        return str(self.settings.postgres_bin / tool)

    def check_installed(self) -> None:
        self.require_path(
            self.settings.postgres_bin / "postgres",
            f"PostgreSQL {self.settings.versions.postgres_major} (Debian package postgresql)",
        )

    def prepare(self) -> None:
        self.make_dir("run")
        password = ensure_secret(self.settings, "pg_password")
        if not (self.data / "PG_VERSION").exists():
            self._initdb(password)
        (self.data / "pg_hba.conf").write_text(
            "# written by changelake: password logins over loopback only\n"
            "local   all          all                    scram-sha-256\n"
            "host    all          all   127.0.0.1/32     scram-sha-256\n"
            "host    replication  all   127.0.0.1/32     scram-sha-256\n"
        )
        self.own_dir()

    def _initdb(self, password: str) -> None:
        pwfile = self.dir / "initdb.pw"
        pwfile.write_text(password)
        self.own_dir()
        pwfile.chmod(0o600)
        cmd = [
            self.bin("initdb"),
            "-D",
            str(self.data),
            "-U",
            self.settings.admin_user,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        ]
        try:
            subprocess.run(
                cmd, user=self.user, cwd=self.dir, check=True, capture_output=True, text=True
            )
        except subprocess.CalledProcessError as exc:
            raise self.failure(f"initdb failed: {exc.stderr.strip()}") from exc
        finally:
            pwfile.unlink(missing_ok=True)

    def command(self) -> list[str]:
        conf = {
            "listen_addresses": self.settings.host,
            "port": str(self.port),
            "unix_socket_directories": str(self.dir / "run"),
            **POSTGRES_REPLICATION,
            "shared_buffers": "256MB",
            "max_connections": "100",
            "fsync": "on",
            "log_min_messages": "warning",
        }
        args = [self.bin("postgres"), "-D", str(self.data)]
        for key, value in conf.items():
            args += ["-c", f"{key}={value}"]
        return args

    def admin_dsn(self, database: str | None = None) -> str:
        password = ensure_secret(self.settings, "pg_password")
        return self.settings.postgres_dsn(self.settings.admin_user, password, database)

    def healthy(self) -> bool:
        try:
            with psycopg.connect(self.admin_dsn("postgres"), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def after_start(self) -> None:
        """Create the demo database, its schema and Debezium's role and publication."""
        with psycopg.connect(self.admin_dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.settings.database,)
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{self.settings.database}"')
        self.psql("shop.sql")
        self.psql(
            "capture.sql",
            debezium_password=ensure_secret(self.settings, "debezium_password"),
            publication=self.settings.publication,
        )

    def psql(self, script: str, **variables: str) -> None:
        """Run one of schemas/*.sql with psql, exactly as the compose init script does."""
        path = self.settings.schemas_dir / script
        cmd = [self.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(path)]
        for key, value in variables.items():
            cmd += ["-v", f"{key}={value}"]
        cmd.append(self.admin_dsn())
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise self.failure(f"{path} failed: {result.stderr.strip()}")

    def endpoint(self) -> dict[str, Any]:
        return {
            "host": self.settings.postgres_host,
            "port": self.port,
            "database": self.settings.database,
            "user": self.settings.admin_user,
            "dsn": self.admin_dsn(),
        }
