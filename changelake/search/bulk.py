"""Bulk writes with external versions: sized requests, per-document outcomes, retries.

Every action carries `version = LSN, version_type = external`, so OpenSearch itself refuses a
document older than the one it holds (a replay, or an event delivered out of order): that answer
(409) is counted as stale, not as a failure. Documents OpenSearch cannot take (a value that does
not fit the mapping) are returned as rejected, with its reason, for `_errors`. Overload and
unavailable shards are retried, document by document, until the client's retry time runs out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from changelake.exceptions import RetryableError
from changelake.search.client import SearchClient, backoff

MAX_BYTES = 5 * 1024 * 1024  # per request; OpenSearch's advice is a few MB
MAX_DOCS = 5000
PROGRESS_EVERY_S = 10.0
# What OpenSearch says about a document it will never take (a value that does not fit the
# mapping, a term too long, an id too long): such a document goes to `_errors`.
_DOCUMENT_ERRORS = {
    "mapper_parsing_exception",
    "strict_dynamic_mapping_exception",
    "document_parsing_exception",
    "illegal_argument_exception",
    "action_request_validation_exception",
}


@dataclass(frozen=True)
class Doc:
    id: str
    version: int
    delete: bool
    source: str | None
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Rejected:
    doc: Doc
    reason: str


@dataclass
class BulkResult:
    written: int = 0  # indexed or deleted (a delete of an absent document included)
    stale: int = 0  # older than the indexed version: a replay, harmlessly refused
    rejected: list[Rejected] = field(default_factory=list)

    def add(self, other: BulkResult) -> None:
        self.written += other.written
        self.stale += other.stale
        self.rejected += other.rejected


def outcome(item: dict[str, Any]) -> tuple[str, str | None]:
    """One bulk item's answer → ("written" | "stale" | "retry" | "rejected", reason)."""
    status = int(item.get("status", 500))
    error = item.get("error")
    if status < 300 or (status == 404 and item.get("result") == "not_found"):
        return "written", None
    kind = error.get("type", "") if isinstance(error, dict) else ""
    reason = _reason(error)
    if status == 409 and kind == "version_conflict_engine_exception":
        return "stale", None
    if status == 400 and kind in _DOCUMENT_ERRORS:
        return "rejected", reason
    # Anything else is about the index or the cluster (a write block, a full disk, a missing
    # index), not this document: retried until OpenSearch recovers or the retry time runs out.
    return "retry", reason


def _reason(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    text = f"{error.get('type', 'error')}: {error.get('reason', '')}"
    cause = error.get("caused_by")
    if isinstance(cause, dict):
        text += f" (caused by {cause.get('type', '')}: {cause.get('reason', '')})"
    return text[:1000]


def action_lines(index: str, doc: Doc) -> bytes:
    meta = {"_index": index, "_id": doc.id, "version": doc.version, "version_type": "external"}
    if doc.delete:
        return (json.dumps({"delete": meta}) + "\n").encode()
    return (json.dumps({"index": meta}) + "\n" + (doc.source or "{}") + "\n").encode()


def chunks(docs: Iterable[Doc], index: str) -> Iterator[list[tuple[Doc, bytes]]]:
    chunk: list[tuple[Doc, bytes]] = []
    size = 0
    for doc in docs:
        lines = action_lines(index, doc)
        if chunk and (size + len(lines) > MAX_BYTES or len(chunk) >= MAX_DOCS):
            yield chunk
            chunk, size = [], 0
        chunk.append((doc, lines))
        size += len(lines)
    if chunk:
        yield chunk


class BulkWriter:
    def __init__(self, client: SearchClient, label: str, say: Callable[[str], None]) -> None:
        self.client, self.label, self.say = client, label, say

    def write(self, docs: Iterable[Doc], index: str, to_alias: bool) -> BulkResult:
        total = BulkResult()
        started = last_said = time.monotonic()
        for chunk in chunks(docs, index):
            total.add(self._send(chunk, to_alias))
            now = time.monotonic()
            if now - last_said >= PROGRESS_EVERY_S:
                done = total.written + total.stale + len(total.rejected)
                self.say(
                    f"{self.label}: {done:,} documents sent "
                    f"({done / max(now - started, 1e-9):,.0f}/s)"
                )
                last_said = now
        return total

    def _send(self, chunk: list[tuple[Doc, bytes]], to_alias: bool) -> BulkResult:
        result = BulkResult()
        deadline = time.monotonic() + self.client.retry_for_s
        attempt = 0
        while chunk:
            items = self.client.bulk(b"".join(lines for _, lines in chunk), to_alias)
            again: list[tuple[Doc, bytes]] = []
            reasons: list[str] = []
            for (doc, lines), item in zip(chunk, items, strict=True):
                kind, reason = outcome(item)
                if kind == "written":
                    result.written += 1
                elif kind == "stale":
                    result.stale += 1
                elif kind == "rejected":
                    result.rejected.append(Rejected(doc, reason or "rejected"))
                else:
                    again.append((doc, lines))
                    reasons.append(reason or "")
            chunk = again
            if chunk:
                pause = backoff(attempt)
                if time.monotonic() + pause > deadline:
                    raise RetryableError(
                        f"{self.label}: OpenSearch kept refusing {len(chunk)} documents "
                        f"for {self.client.retry_for_s:.0f}s: {reasons[0]}"
                    )
                self.say(
                    f"{self.label}: {len(chunk)} documents not taken ({reasons[0]}); "
                    f"retrying in {pause:g}s"
                )
                time.sleep(pause)
                attempt += 1
        return result
