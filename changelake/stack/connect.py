"""Kafka Connect in distributed mode, with the Debezium Postgres connector on its plugin path."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from changelake.capture.source import stack_environment
from changelake.settings import (
    CONNECT_CONFIG_TOPIC,
    CONNECT_OFFSETS_TOPIC,
    CONNECT_RECORD_LIMITS,
    CONNECT_STATUS_TOPIC,
)
from changelake.stack.service import JavaService

PLUGINS_FOLDER = "plugins"
DEBEZIUM_PLUGIN = "plugins/debezium-postgres"
PROVIDERS = "org.apache.kafka.common.config.provider"


class Connect(JavaService):
    name = "connect"
    port_env = "CHANGELAKE_CONNECT_PORT"
    vendor_folder = "connect"
    main_class = "org.apache.kafka.connect.cli.ConnectDistributed"
    start_timeout_s = 150.0
    stop_grace_s = 45.0

    @property
    def port(self) -> int:
        return self.settings.connect_port

    @property
    def config(self) -> Path:
        return self.dir / "worker.properties"

    def check_installed(self) -> None:
        super().check_installed()
        self.require_path(
            self.settings.vendor / DEBEZIUM_PLUGIN / ".complete", "the Debezium Postgres plugin"
        )

    def prepare(self) -> None:
        self.make_dir()
        s = self.settings
        props = {
            "bootstrap.servers": s.kafka_bootstrap,
            "group.id": "changelake-connect",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "config.storage.topic": CONNECT_CONFIG_TOPIC,
            "offset.storage.topic": CONNECT_OFFSETS_TOPIC,
            "status.storage.topic": CONNECT_STATUS_TOPIC,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            # Source offsets (the LSN Debezium confirms) are flushed often, so a restart replays
            # little; the pipeline's LSN guard makes whatever it replays harmless.
            "offset.flush.interval.ms": "1000",
            "listeners": f"http://{s.host}:{s.connect_port}",
            "rest.advertised.host.name": s.connect_host,
            "rest.advertised.port": str(s.connect_port),
            "plugin.path": str(s.vendor / PLUGINS_FOLDER),
            "plugin.discovery": "hybrid_warn",
            "topic.creation.enable": "true",
            # Secrets reach connectors as ${env:NAME} or ${file:PATH:KEY}, never inline.
            "config.providers": "env,file",
            "config.providers.env.class": f"{PROVIDERS}.EnvVarConfigProvider",
            "config.providers.file.class": f"{PROVIDERS}.FileConfigProvider",
            **CONNECT_RECORD_LIMITS,
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.write_log4j()
        self.own_dir()

    def environment(self) -> dict[str, str]:
        return stack_environment(self.settings, generate=True)

    def command(self) -> list[str]:
        return self.java_command(self.settings.connect_heap, str(self.config))

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.settings.connect_url}/connectors", timeout=3) as r:
                json.load(r)
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def endpoint(self) -> dict[str, Any]:
        return {"url": self.settings.connect_url}
