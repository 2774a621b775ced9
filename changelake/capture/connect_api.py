"""A small client for Kafka Connect's REST API: JSON in, JSON out, errors that name the service."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from changelake.exceptions import RetryableError


class ConnectApiError(RetryableError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Kafka Connect answered {status}: {message}")
        self.status = status
        self.detail = message


class ConnectApi:
    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise ConnectApiError(exc.code, _error_message(exc.read())) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise RetryableError(
                f"Kafka Connect is not reachable at {self.url} ({exc})",
                "start it with `changelake stack up` (or check CHANGELAKE_CONNECT_HOST/PORT)",
            ) from exc
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def connector_config(self, name: str) -> dict[str, str] | None:
        try:
            config: dict[str, str] = self.get(f"/connectors/{quote(name)}/config")
        except ConnectApiError as exc:
            if exc.status == 404:
                return None
            raise
        return config


def quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _error_message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:500]
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)
