"""Kafka TLS and SASL from the environment: one set of settings for the Python clients and for
Spark's Kafka source, and errors that name the variable."""

from __future__ import annotations

import pytest

from changelake.exceptions import ConfigError
from changelake.kafka_security import from_env

CA = "/etc/ssl/certs/ca-certificates.crt"
SCRAM = {
    "CHANGELAKE_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
    "CHANGELAKE_KAFKA_USER": "changelake",
    "CHANGELAKE_KAFKA_PASSWORD": 'pa"ss\\word',
    "CHANGELAKE_KAFKA_CA": CA,
}


def test_plaintext_adds_nothing() -> None:
    security = from_env({})
    assert security.librdkafka() == {} and security.spark() == {}


def test_sasl_ssl_gives_both_clients_the_same_login_and_ca() -> None:
    security = from_env(SCRAM)
    assert security.librdkafka() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "changelake",
        "sasl.password": 'pa"ss\\word',
        "ssl.ca.location": CA,
    }
    assert security.spark() == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        # the password's quote and backslash escaped inside the JAAS value
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="changelake" password="pa\\"ss\\\\word";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": CA,
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CHANGELAKE_KAFKA_SECURITY_PROTOCOL": "TLS"}, "CHANGELAKE_KAFKA_SECURITY_PROTOCOL='TLS'"),
        (
            {**SCRAM, "CHANGELAKE_KAFKA_SASL_MECHANISM": "GSSAPI"},
            "CHANGELAKE_KAFKA_SASL_MECHANISM='GSSAPI'",
        ),
        (
            {k: v for k, v in SCRAM.items() if k != "CHANGELAKE_KAFKA_PASSWORD"},
            "CHANGELAKE_KAFKA_PASSWORD is not set",
        ),
        ({"CHANGELAKE_KAFKA_SASL_MECHANISM": "PLAIN"}, "needs a SASL protocol"),
        ({"CHANGELAKE_KAFKA_CA": "/nowhere/ca.pem"}, "CHANGELAKE_KAFKA_CA='/nowhere/ca.pem'"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        from_env(env)
