"""A single-node Kafka in KRaft mode (broker and controller in one process)."""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from changelake.settings import KAFKA_RECORD_LIMITS
from changelake.stack.service import JavaService


class Kafka(JavaService):
    name = "kafka"
    port_env = "CHANGELAKE_KAFKA_PORT"
    vendor_folder = "kafka"
    main_class = "kafka.Kafka"
    start_timeout_s = 90.0

    @property
    def port(self) -> int:
        return self.settings.kafka_port

    @property
    def config(self) -> Path:
        return self.dir / "server.properties"

    def prepare(self) -> None:
        data = self.make_dir("data")
        s = self.settings
        listeners = (
            f"PLAINTEXT://{s.host}:{s.kafka_port},CONTROLLER://{s.host}:{s.kafka_controller_port}"
        )
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{s.host}:{s.kafka_controller_port}",
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{s.kafka_host}:{s.kafka_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(data),
            # Topics are created on purpose (Connect's topic creation, our own admin calls):
            # a typo must not quietly create a topic.
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.cleaner.threads": "1",
            "num.network.threads": "2",
            "num.io.threads": "2",
            **KAFKA_RECORD_LIMITS,
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.write_log4j()
        self.own_dir()
        if not (data / "meta.properties").exists():
            self._format()

    def _format(self) -> None:
        id_file = self.dir / "cluster.id"
        if not id_file.exists():
            raw = uuid.uuid4().bytes
            id_file.write_text(base64.urlsafe_b64encode(raw).decode().rstrip("="))
        cmd = [
            str(self.java),
            "-Xmx256m",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
            "-cp",
            f"{self.jars}/*",
            "kafka.tools.StorageTool",
            "format",
            "--ignore-formatted",
            "-t",
            id_file.read_text().strip(),
            "-c",
            str(self.config),
        ]
        result = subprocess.run(cmd, user=self.user, capture_output=True, text=True)
        if result.returncode != 0:
            raise self.failure(f"formatting storage failed: {result.stderr or result.stdout}")

    def command(self) -> list[str]:
        return self.java_command(self.settings.kafka_heap, str(self.config))

    def healthy(self) -> bool:
        admin = AdminClient({"bootstrap.servers": self.settings.kafka_bootstrap, "log_level": 0})
        try:
            metadata = admin.list_topics(timeout=2)
        except KafkaException:
            return False
        return bool(metadata.brokers)

    def endpoint(self) -> dict[str, Any]:
        return {"bootstrap": self.settings.kafka_bootstrap}
