"""changelake's OpenSearch client: opensearch-py's transport (connection pooling, TLS, basic
auth) under one call that retries with backoff and raises errors naming the service.

Connection errors, 429 and 5xx are retried with growing pauses until `retry_for_s` has passed, so
an outage delays whoever is writing instead of losing anything; everything else fails at once.
The transport's own count of retries is off: the time bound here is what the pipeline promises.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as TransportConnectionError
from opensearchpy.exceptions import SSLError, TransportError
from opensearchpy.serializer import JSONSerializer

from changelake.exceptions import ChangelakeError, RetryableError
from changelake.settings import Settings

BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
PASSWORD_VARIABLE = "CHANGELAKE_OPENSEARCH_PASSWORD"
Say = Callable[[str], None]


class SearchApiError(ChangelakeError):
    """OpenSearch answered with an error that retrying will not fix."""

    def __init__(self, status: int, error_type: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"OpenSearch answered {status}: {error_type}: {reason}", hint)
        self.status, self.error_type, self.reason = status, error_type, reason


class _ExactJson(JSONSerializer):
    """Decimals stay exact: a price read back from _source is the digits Delta holds."""

    def loads(self, s: str) -> Any:
        return json.loads(s, parse_float=Decimal)


def backoff(attempt: int) -> float:
    return BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]


class SearchClient:
    def __init__(
        self,
        url: str,
        retry_for_s: float = 600.0,
        say: Say | None = None,
        timeout_s: float = 120.0,
        *,
        user: str = "",
        password: str = "",
        ca_file: str = "",
    ) -> None:
        self.url = url.rstrip("/")
        self.retry_for_s = retry_for_s
        self.say = say or (lambda _text: None)
        self.timeout_s = timeout_s
        self._api = OpenSearch(
            hosts=[self.url],
            http_auth=(user, password) if user else None,
            verify_certs=self.url.startswith("https:"),
            ca_certs=ca_file or None,
            ssl_show_warn=False,
            serializer=_ExactJson(),
            max_retries=0,
            timeout=timeout_s,
        )

    @classmethod
    def of(
        cls, settings: Settings, retry_for_s: float = 600.0, say: Say | None = None
    ) -> SearchClient:
        """The client for the configured OpenSearch: its URL (https when CHANGELAKE_OPENSEARCH_TLS
        is on), the CA that signed its certificate, and its user with the password from
        CHANGELAKE_OPENSEARCH_PASSWORD (never in a file of the project's)."""
        return cls(
            settings.opensearch_url,
            retry_for_s,
            say,
            user=settings.opensearch_user,
            password=os.environ.get(PASSWORD_VARIABLE, ""),
            ca_file=str(settings.opensearch_ca or ""),
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        ndjson: bytes | None = None,
        missing_ok: bool = False,
    ) -> Any:
        """One call, retried while OpenSearch is unreachable or overloaded. A 404 is None when
        `missing_ok`; any other error raises SearchApiError."""
        deadline = time.monotonic() + self.retry_for_s
        attempt = 0
        while True:
            try:
                return self._once(method, path, body, ndjson, missing_ok)
            except RetryableError as exc:
                pause = backoff(attempt)
                if time.monotonic() + pause > deadline:
                    raise RetryableError(
                        f"{exc.message}; gave up after {self.retry_for_s:.0f}s of retries",
                        exc.hint,
                    ) from exc
                self.say(f"opensearch: {exc.message}; retrying in {pause:g}s")
                time.sleep(pause)
                attempt += 1

    def _once(
        self, method: str, path: str, body: Any, ndjson: bytes | None, missing_ok: bool
    ) -> Any:
        # The connection sends JSON's content-type by default; a bulk body replaces it.
        headers = {"content-type": "application/x-ndjson"} if ndjson is not None else None
        data = ndjson.decode() if ndjson is not None else body
        try:
            return self._api.transport.perform_request(method, path, body=data, headers=headers)
        except SSLError as exc:  # a certificate not trusted: retrying will not change that
            raise ChangelakeError(
                f"OpenSearch at {self.url} presented a certificate that could not be verified "
                f"({exc.info or exc.error})",
                "set CHANGELAKE_OPENSEARCH_CA to the PEM file of the CA that signed it",
            ) from exc
        except TransportConnectionError as exc:
            raise RetryableError(
                f"OpenSearch is not reachable at {self.url} ({exc.info or exc.error})",
                "start it with `changelake stack up opensearch` "
                "(or check CHANGELAKE_OPENSEARCH_HOST/PORT/TLS)",
            ) from exc
        except TransportError as exc:
            status = int(exc.status_code) if str(exc.status_code).isdigit() else 500
            if status == 404 and missing_ok:
                return None
            error_type, reason = _error(exc.info, exc.error)
            if status in RETRY_STATUS:
                raise RetryableError(
                    f"OpenSearch answered {status}: {error_type}: {reason}"
                ) from exc
            hint = (
                "check CHANGELAKE_OPENSEARCH_USER and CHANGELAKE_OPENSEARCH_PASSWORD"
                if status in (401, 403)
                else None
            )
            raise SearchApiError(status, error_type, reason, hint) from exc

    # --- the few calls changelake makes -------------------------------------------------------
    def alias_indexes(self, alias: str) -> list[str]:
        """The concrete indexes behind an alias (none if it does not exist)."""
        found = self.request("GET", f"/_alias/{alias}", missing_ok=True) or {}
        return sorted(found)

    def bulk(self, lines: bytes, to_alias: bool) -> list[dict[str, Any]]:
        # require_alias: a write to an alias that vanished must fail, not auto-create an index
        # with guessed mappings under the alias's name.
        path = "/_bulk?require_alias=true" if to_alias else "/_bulk"
        answer = self.request("POST", path, ndjson=lines)
        return [next(iter(item.values())) for item in answer["items"]]


def _error(info: Any, fallback: str) -> tuple[str, str]:
    """(type, reason) of an error answer, whatever shape its body has."""
    error = info.get("error") if isinstance(info, dict) else None
    if isinstance(error, dict):
        return str(error.get("type", "error")), str(error.get("reason", ""))[:500]
    return "error", str(error or info or fallback)[:300]
