"""How changelake's Kafka clients authenticate and encrypt, from the environment: the same
settings for the Python clients (librdkafka: topics, watermarks, schema records) and for Spark's
Kafka source (the Java client), so the two never disagree.

    CHANGELAKE_KAFKA_SECURITY_PROTOCOL  PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
    CHANGELAKE_KAFKA_SASL_MECHANISM     PLAIN, SCRAM-SHA-256 (default with SASL) or SCRAM-SHA-512
    CHANGELAKE_KAFKA_USER               the SASL user
    CHANGELAKE_KAFKA_PASSWORD           its password (from the environment only)
    CHANGELAKE_KAFKA_CA                 a PEM file with the CA that signed the brokers' certificates
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from changelake.exceptions import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class KafkaSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    user: str = ""
    password: str = ""
    ca_file: str = ""

    def librdkafka(self) -> dict[str, str]:
        """Settings for confluent-kafka's clients (none for plaintext)."""
        conf: dict[str, str] = {}
        if self.protocol != "PLAINTEXT":
            conf["security.protocol"] = self.protocol
        if self.mechanism:
            conf |= {
                "sasl.mechanism": self.mechanism,
                "sasl.username": self.user,
                "sasl.password": self.password,
            }
        if self.ca_file:
            conf["ssl.ca.location"] = self.ca_file
        return conf

    def spark(self) -> dict[str, str]:
        """The same, as options of Spark's Kafka source (the Java client's names)."""
        conf: dict[str, str] = {}
        if self.protocol != "PLAINTEXT":
            conf["kafka.security.protocol"] = self.protocol
        if self.mechanism:
            conf["kafka.sasl.mechanism"] = self.mechanism
            conf["kafka.sasl.jaas.config"] = (
                f"{MECHANISMS[self.mechanism]} required username={_jaas(self.user)} "
                f"password={_jaas(self.password)};"
            )
        if self.ca_file:
            conf["kafka.ssl.truststore.type"] = "PEM"
            conf["kafka.ssl.truststore.location"] = self.ca_file
        return conf


def _jaas(value: str) -> str:
    """A JAAS option value: quoted, with its quotes and backslashes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def from_env(env: Mapping[str, str] | None = None) -> KafkaSecurity:
    """The environment's Kafka security settings, checked: an error names the variable."""
    env = os.environ if env is None else env
    protocol = (env.get("CHANGELAKE_KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(
            f"CHANGELAKE_KAFKA_SECURITY_PROTOCOL={protocol!r}: "
            f"expected one of {', '.join(PROTOCOLS)}"
        )
    sasl = protocol.startswith("SASL")
    mechanism = (env.get("CHANGELAKE_KAFKA_SASL_MECHANISM") or "").upper()
    if sasl:
        mechanism = mechanism or "SCRAM-SHA-256"
        if mechanism not in MECHANISMS:
            raise ConfigError(
                f"CHANGELAKE_KAFKA_SASL_MECHANISM={mechanism!r}: expected one of "
                f"{', '.join(MECHANISMS)}"
            )
        for name in ("CHANGELAKE_KAFKA_USER", "CHANGELAKE_KAFKA_PASSWORD"):
            if not env.get(name):
                raise ConfigError(f"{name} is not set: {protocol} needs a user and a password")
    elif mechanism:
        raise ConfigError(
            f"CHANGELAKE_KAFKA_SASL_MECHANISM={mechanism!r} needs a SASL protocol "
            f"(CHANGELAKE_KAFKA_SECURITY_PROTOCOL is {protocol})"
        )
    ca = env.get("CHANGELAKE_KAFKA_CA") or ""
    if ca and not os.path.isfile(ca):
        raise ConfigError(f"CHANGELAKE_KAFKA_CA={ca!r}: no such file")
    return KafkaSecurity(
        protocol,
        mechanism if sasl else "",
        env.get("CHANGELAKE_KAFKA_USER", "") if sasl else "",
        env.get("CHANGELAKE_KAFKA_PASSWORD", "") if sasl else "",
        ca,
    )
