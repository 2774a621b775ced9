"""A small OpenSearch REST client: JSON in and out, retries with backoff, errors naming the service.

Connection errors, 429 and 5xx are retried with growing pauses until `retry_for_s` has passed, so
an outage delays whoever is writing instead of losing anything; everything else fails at once.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pipelines.exceptions import ChangelakeError, RetryableError

BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
Say = Callable[[str], None]


class SearchApiError(ChangelakeError):
    """OpenSearch answered with an error that retrying will not fix."""

    def __init__(self, status: int, error_type: str, reason: str) -> None:
        super().__init__(f"OpenSearch answered {status}: {error_type}: {reason}")
        self.status, self.error_type, self.reason = status, error_type, reason


def backoff(attempt: int) -> float:
    return BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]


class SearchClient:
    def __init__(
        self,
        url: str,
        retry_for_s: float = 600.0,
        say: Say | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry_for_s = retry_for_s
        self.say = say or (lambda _text: None)
        self.timeout_s = timeout_s

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
        data = (
            ndjson if ndjson is not None else (None if body is None else json.dumps(body).encode())
        )
        kind = "application/x-ndjson" if ndjson is not None else "application/json"
        req = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method, headers={"Content-Type": kind}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
            if status == 404 and missing_ok:
                return None
            error_type, reason = _error(raw)
            if status in RETRY_STATUS:
                raise RetryableError(
                    f"OpenSearch answered {status}: {error_type}: {reason}"
                ) from exc
            raise SearchApiError(status, error_type, reason) from exc
        except (urllib.error.URLError, OSError) as exc:
            why = getattr(exc, "reason", None) or exc
            raise RetryableError(
                f"OpenSearch is not reachable at {self.url} ({why})",
                "start it with `changelake stack up opensearch` "
                "(or check CHANGELAKE_OPENSEARCH_HOST/PORT)",
            ) from exc
        # Decimals stay exact: a price read back from _source is the digits Delta holds.
        return json.loads(raw, parse_float=Decimal) if raw else None

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


def _error(raw: bytes) -> tuple[str, str]:
    try:
        body = json.loads(raw)
    except ValueError:
        return "error", raw.decode("utf-8", "replace")[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("type", "error")), str(error.get("reason", ""))[:500]
    return "error", str(error or body)[:300]
