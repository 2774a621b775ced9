"""A one-node OpenSearch with its security plugin on (TLS with the plugin's demo certificates,
basic auth), from the distribution `make setup` prepares (changelake/stack/secured_opensearch.py),
started like the stack's own OpenSearch (as the service user, its own config and data) on free
loopback ports, and stopped afterwards."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from changelake import waiting
from changelake.exceptions import ChangelakeError
from changelake.search.client import SearchClient
from changelake.settings import Settings
from changelake.stack import process
from changelake.stack.opensearch import OpenSearch
from changelake.stack.secured_opensearch import admin_password, secured_dir
from tests.support import free_port

HOST = "127.0.0.1"
USER = "admin"


@dataclass(frozen=True)
class Secured:
    port: int
    ca_file: Path
    password: str

    def env(self) -> dict[str, str]:
        """What a changelake command needs to reach it."""
        return {
            "CHANGELAKE_OPENSEARCH_HOST": HOST,
            "CHANGELAKE_OPENSEARCH_PORT": str(self.port),
            "CHANGELAKE_OPENSEARCH_TLS": "true",
            "CHANGELAKE_OPENSEARCH_CA": str(self.ca_file),
            "CHANGELAKE_OPENSEARCH_USER": USER,
            "CHANGELAKE_OPENSEARCH_PASSWORD": self.password,
        }


class _Node(OpenSearch):
    name = "opensearch-secured"

    def __init__(self, settings: Settings, folder: Path) -> None:
        super().__init__(settings)
        self.folder, self.http, self.transport = folder, free_port(HOST), free_port(HOST)

    @property
    def dir(self) -> Path:
        return self.folder

    @property
    def log(self) -> Path:
        return self.folder / "opensearch.log"

    @property
    def pidfile(self) -> Path:
        return self.folder / "opensearch.pid"

    @property
    def port(self) -> int:
        return self.http

    @property
    def dist(self) -> Path:
        return secured_dir(self.settings)

    def prepare(self) -> None:
        for folder in ("data", "logs", "tmp"):
            self.make_dir(folder)
        shutil.copytree(self.dist / "config", self.conf_dir)  # the demo TLS settings and certs
        self._write_jvm_options()
        with (self.conf_dir / "opensearch.yml").open("a") as yml:
            yml.write(
                f"\nnetwork.host: {HOST}\nhttp.port: {self.http}\n"
                f"transport.port: {self.transport}\ndiscovery.type: single-node\n"
                f"path.data: {self.dir / 'data'}\npath.logs: {self.dir / 'logs'}\n"
            )
        self.own_dir()

    def secured(self) -> Secured:
        return Secured(self.http, self.conf_dir / "root-ca.pem", admin_password(self.settings))

    def healthy(self) -> bool:
        s = self.secured()
        client = SearchClient(
            f"https://{HOST}:{self.http}", 0, user=USER, password=s.password, ca_file=str(s.ca_file)
        )
        try:
            health = client.request("GET", "/_cluster/health")
        except ChangelakeError:
            return False
        return bool(health) and health.get("status") in ("green", "yellow")


@contextmanager
def secured_opensearch(settings: Settings, folder: Path) -> Iterator[Secured]:
    node = _Node(settings, folder)
    node.check_installed()
    node.prepare()
    process.start(node.spec())
    try:
        if not waiting.wait_until(node.healthy, 180, alive=lambda: node.pid() is not None):
            raise node.failure("the secured OpenSearch did not become healthy")
        yield node.secured()
    finally:
        process.stop(node.pidfile, signal.SIGTERM, 60)
