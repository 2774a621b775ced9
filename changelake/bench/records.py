"""Change records as the two converters write them, side by side on the same tables.

The bench runs two connectors on its database: changelake's (LeanJsonConverter: payload, the
schema's fingerprint in a header) and the baseline's (the stock JsonConverter with schemas
inline, as users run it). This module measures what differs: bytes per record, and Debezium's
rate and Connect's CPU while each connector works alone; and renders the report's section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from changelake import kafka_io
from changelake.bench import markdown as md

SAMPLE = 2000  # newest records per topic whose sizes are averaged
CONVERTERS = {"lean": "changelake (LeanJsonConverter)", "stock": "stock JsonConverter"}


class ConverterFigures(TypedDict, total=False):
    bytes_per_record: dict[str, float]  # by table: key + value + headers, tombstones left out
    snapshot_rows_per_s: float  # Debezium's initial snapshot into the topics
    snapshot_connect_cpu_s: float
    changes_per_s: float  # Debezium catching up on the stage-limit load alone
    connect_cpu_s_per_1k: float  # Connect's CPU seconds per 1,000 of those changes


RecordFigures = dict[str, ConverterFigures]  # by converter: "lean", "stock"


def record_bytes(bootstrap: str, topic: str, sample: int = SAMPLE) -> float | None:
    """Mean bytes of the newest `sample` change records of a topic (as produced, uncompressed)."""
    marks = kafka_io.watermarks(bootstrap, topic)
    start = {p: max(low, high - sample // max(len(marks), 1)) for p, (low, high) in marks.items()}
    sizes = [
        len(r.key or b"") + len(r.value) + sum(len(k) + len(v) for k, v in r.headers.items())
        for r in kafka_io.read(bootstrap, topic, start, timeout_s=120, raw=True)
        if r.value is not None
    ]
    return sum(sizes) / len(sizes) if sizes else None


def sizes(bootstrap: str, topics: Mapping[str, str]) -> dict[str, float]:
    """Mean record bytes by table (`topics`: table → topic)."""
    found = {t: record_bytes(bootstrap, topic) for t, topic in topics.items()}
    return {t: b for t, b in found.items() if b is not None}


# --- report -----------------------------------------------------------------------------------


def records_section(figures: RecordFigures | None) -> list[str]:
    """The report's section: each figure for both converters, and lean ÷ stock."""
    if not figures:
        return []
    lean: Mapping[str, Any] = figures.get("lean", {})
    stock: Mapping[str, Any] = figures.get("stock", {})
    rows: list[Sequence[str]] = []
    tables = sorted(set(lean.get("bytes_per_record", {})) | set(stock.get("bytes_per_record", {})))
    for t in tables:
        a, b = lean.get("bytes_per_record", {}).get(t), stock.get("bytes_per_record", {}).get(t)
        rows.append(
            [
                f"bytes per record, {t}",
                md.cell(a, md.count),
                md.cell(b, md.count),
                md.ratio_cell(a, b),
            ]
        )
    for key, label in (
        ("snapshot_rows_per_s", "Debezium snapshot (rows/s)"),
        ("snapshot_connect_cpu_s", "Connect CPU s during the snapshot"),
        ("changes_per_s", "Debezium streaming, alone on the same WAL (changes/s)"),
        ("connect_cpu_s_per_1k", "Connect CPU s per 1,000 streamed changes"),
    ):
        a, b = lean.get(key), stock.get(key)
        rows.append([label, md.cell(a, md.number), md.cell(b, md.number), md.ratio_cell(a, b)])
    header = ["figure", CONVERTERS["lean"], CONVERTERS["stock"], "lean \u00f7 stock"]
    note = (
        "Two connectors capture the same database: changelake's writes each event's payload "
        "with its schema's fingerprint in a header (the schema once, to `changelake.schemas`); "
        "the baseline's uses the stock JsonConverter with the schema inside every record. Sizes "
        f"are the newest {SAMPLE:,} change records of each topic (key, value and headers, as "
        "produced, before Kafka's compression), after the stage-limit load."
    )
    return ["## Change records: lean vs stock converter", note, md.table(header, rows)]
