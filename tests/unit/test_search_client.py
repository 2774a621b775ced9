"""How the search client reaches OpenSearch: plain http by default, https with a verified
certificate and basic auth when security is on; settings read from the environment."""

from __future__ import annotations

import base64

import pytest

from changelake.exceptions import ConfigError
from changelake.search.client import SearchClient
from changelake.settings import load_settings

CA = "/etc/ssl/certs/ca-certificates.crt"


def connection(client: SearchClient) -> object:
    return client._api.transport.connection_pool.connection  # type: ignore[attr-defined]


def test_security_on_means_https_verified_by_the_ca_and_basic_auth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings(
        {
            "CHANGELAKE_OPENSEARCH_HOST": "search.internal",
            "CHANGELAKE_OPENSEARCH_TLS": "true",
            "CHANGELAKE_OPENSEARCH_CA": CA,
            "CHANGELAKE_OPENSEARCH_USER": "changelake",
        }
    )
    monkeypatch.setenv("CHANGELAKE_OPENSEARCH_PASSWORD", "s3cret-for-test")
    conn = connection(SearchClient.of(settings))
    assert conn.host == "https://search.internal:9200"  # type: ignore[attr-defined]
    assert conn.use_ssl  # type: ignore[attr-defined]
    assert conn.pool.ca_certs == CA  # type: ignore[attr-defined]
    assert conn.pool.cert_reqs == "CERT_REQUIRED"  # type: ignore[attr-defined]
    token = base64.b64encode(b"changelake:s3cret-for-test").decode()
    assert conn.headers["authorization"] == f"Basic {token}"  # type: ignore[attr-defined]


def test_the_local_default_is_plain_http_without_credentials() -> None:
    conn = connection(SearchClient.of(load_settings({})))
    assert conn.host == "http://127.0.0.1:9200"  # type: ignore[attr-defined]
    assert "authorization" not in conn.headers  # type: ignore[attr-defined]


def test_a_tls_flag_that_is_not_a_boolean_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="CHANGELAKE_OPENSEARCH_TLS='maybe'"):
        load_settings({"CHANGELAKE_OPENSEARCH_TLS": "maybe"})
