"""Settings: defaults, environment overrides, and errors that name the variable."""

from __future__ import annotations

import pytest

from changelake.exceptions import ConfigError
from changelake.settings import load_settings


def test_defaults_are_the_standard_ports_on_loopback() -> None:
    s = load_settings({})
    assert (s.postgres_port, s.kafka_port, s.connect_port, s.opensearch_port) == (
        5432,
        9092,
        8083,
        9200,
    )
    assert s.kafka_bootstrap == "127.0.0.1:9092"
    assert s.home == s.root / ".changelake"
    assert s.vendor == s.home / "vendor"


def test_environment_overrides_ports_hosts_and_home(tmp_path: object) -> None:
    s = load_settings(
        {
            "CHANGELAKE_HOME": "/tmp/cl",
            "CHANGELAKE_KAFKA_PORT": "19092",
            "CHANGELAKE_CONNECT_HOST": "connect",
        }
    )
    assert str(s.home) == "/tmp/cl" and str(s.vendor) == "/tmp/cl/vendor"
    assert s.kafka_bootstrap == "127.0.0.1:19092"
    assert s.connect_url == "http://connect:8083"


@pytest.mark.parametrize("value", ["abc", "0", "70000", "-1"])
def test_a_bad_port_names_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match=f"CHANGELAKE_PG_PORT={value!r} is not a TCP port"):
        load_settings({"CHANGELAKE_PG_PORT": value})


def test_versions_come_from_the_pom() -> None:
    versions = load_settings({}).versions
    assert versions.spark == "4.2.0"
    assert versions.kafka.startswith("4.3.")
    # 3.7 keeps, in its offsets, how many events of one LSN were sent (lsn_events_processed):
    # 3.6 lost the rest of them on a restart inside a bulk transaction (issue 13).
    major, minor = (int(part) for part in versions.debezium.split(".")[:2])
    assert (major, minor) >= (3, 7)
    assert versions.opensearch.startswith("2.19.")


def test_slot_lag_warning_threshold_defaults_to_one_gib_and_can_be_set() -> None:
    assert load_settings({}).slot_lag_warn_bytes == 1 << 30
    env = {"CHANGELAKE_SLOT_LAG_WARN_BYTES": "5000000"}
    assert load_settings(env).slot_lag_warn_bytes == 5_000_000
    assert load_settings({"CHANGELAKE_SLOT_LAG_WARN_BYTES": "0"}).slot_lag_warn_bytes == 0


@pytest.mark.parametrize("value", ["1GB", "-1", "1.5", "1e9", " 5", "²"])
def test_a_bad_slot_lag_threshold_names_the_variable(value: str) -> None:
    with pytest.raises(
        ConfigError, match=f"CHANGELAKE_SLOT_LAG_WARN_BYTES={value!r} is not a number of bytes"
    ):
        load_settings({"CHANGELAKE_SLOT_LAG_WARN_BYTES": value})
