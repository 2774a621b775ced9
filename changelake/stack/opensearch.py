"""OpenSearch from its integ-test zip on Maven Central: one node, loopback only, small heap."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from changelake.stack.service import Service


def distribution_dir(vendor: Path, version: str) -> Path:
    return vendor / f"opensearch-{version}"


class OpenSearch(Service):
    name = "opensearch"
    port_env = "CHANGELAKE_OPENSEARCH_PORT"
    start_timeout_s = 150.0

    @property
    def port(self) -> int:
        return self.settings.opensearch_port

    @property
    def dist(self) -> Path:
        return distribution_dir(self.settings.vendor, self.settings.versions.opensearch)

    @property
    def conf_dir(self) -> Path:
        return self.dir / "config"

    def check_installed(self) -> None:
        self.require_path(self.settings.java_home / "bin" / "java", "Java 17 (set JAVA_HOME)")
        self.require_path(self.dist / ".complete", "the OpenSearch distribution")

    def prepare(self) -> None:
        self.make_dir("data")
        self.make_dir("logs")
        self.make_dir("tmp")
        if not self.conf_dir.exists():
            shutil.copytree(self.dist / "config", self.conf_dir)
        self._write_jvm_options()
        s = self.settings
        # Binding to loopback keeps OpenSearch in development mode: no production bootstrap
        # checks (vm.max_map_count and friends), which a desktop or CI machine may fail.
        (self.conf_dir / "opensearch.yml").write_text(
            "cluster.name: changelake\n"
            "node.name: changelake-1\n"
            f"network.host: {s.host}\n"
            f"http.port: {s.opensearch_port}\n"
            f"transport.port: {s.opensearch_transport_port}\n"
            "discovery.type: single-node\n"
            f"path.data: {self.dir / 'data'}\n"
            f"path.logs: {self.dir / 'logs'}\n"
            "action.auto_create_index: true\n"
            "cluster.routing.allocation.disk.threshold_enabled: false\n"
        )
        self.own_dir()

    def _write_jvm_options(self) -> None:
        # The stock options write GC logs and heap dumps relative to the working directory, which
        # would be the root-owned distribution; point them at our own folders, and let
        # OPENSEARCH_JAVA_OPTS set the heap.
        logs, data = self.dir / "logs", self.dir / "data"
        text = (self.dist / "config" / "jvm.options").read_text()
        text = text.replace("=logs/", f"={logs}/").replace("file=logs/", f"file={logs}/")
        text = text.replace("-XX:HeapDumpPath=data", f"-XX:HeapDumpPath={data}")
        lines = [ln for ln in text.splitlines() if not ln.startswith(("-Xms", "-Xmx"))]
        (self.conf_dir / "jvm.options").write_text("\n".join(lines) + "\n")

    def environment(self) -> dict[str, str]:
        java_home = str(self.settings.java_home)
        heap = self.settings.opensearch_heap
        return {
            "JAVA_HOME": java_home,
            "OPENSEARCH_JAVA_HOME": java_home,
            "OPENSEARCH_PATH_CONF": str(self.conf_dir),
            "OPENSEARCH_JAVA_OPTS": f"-Xms{heap} -Xmx{heap}",
            "OPENSEARCH_TMPDIR": str(self.dir / "tmp"),
        }

    def command(self) -> list[str]:
        return [str(self.dist / "bin" / "opensearch")]

    def healthy(self) -> bool:
        try:
            url = f"{self.settings.opensearch_url}/_cluster/health"
            with urllib.request.urlopen(url, timeout=3) as response:
                return json.load(response).get("status") in ("green", "yellow")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def endpoint(self) -> dict[str, Any]:
        return {"url": self.settings.opensearch_url}
