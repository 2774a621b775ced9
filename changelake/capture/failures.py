"""Connect's and Debezium's failures as one sentence and the next step. The Java trace stays
in Connect's log (and `connectors status --json`), not on the terminal."""

from __future__ import annotations

import re
from dataclasses import dataclass

# What to do when a connector's slot lost changes (slot_trouble's causes, and the task's own
# "no longer available on the server"): the run mends it (apply/resync.py).
RESYNC_STEP = (
    "`changelake run` re-syncs it by itself (a new slot, every keyed table sent again, the rows"
    " deleted meanwhile deleted); with CHANGELAKE_RESYNC=manual, `CHANGELAKE_RESYNC=auto"
    ' changelake run --once` does it once (docs/troubleshooting.md, "A replication slot lost")'
)


@dataclass(frozen=True)
class Known:
    pattern: str  # searched in the trace
    sentence: str  # {name}: the connector
    next_step: str


KNOWN = (
    Known(
        r"The message is (?P<size>\d+) bytes when serialized which is larger than (?P<limit>\d+)",
        "{name} produced a change record of {size} bytes, over the {limit} bytes its producer "
        "accepts (max.request.size), so capture of every table of this connector stopped",
        'Connect\'s log names its topic ("failed to send record to <topic>"); shrink that '
        "row, or leave its table out of "
        "table.include.list, or raise the limit for the worker's producer and the broker "
        "(changelake sets 64 MiB: MAX_RECORD_BYTES), then `changelake connectors apply`",
    ),
    Known(
        r"RecordTooLargeException",
        "{name} produced a change record larger than Kafka accepts, so capture of every table "
        "of this connector stopped",
        'Connect\'s log names its topic ("failed to send record to <topic>"); shrink that '
        "row, or leave its table out of "
        "table.include.list, or raise the broker's message.max.bytes and the worker's producer "
        "max.request.size (changelake sets 64 MiB: MAX_RECORD_BYTES), then "
        "`changelake connectors apply`",
    ),
    Known(
        r"special value \(NaN/Infinity\) for Decimal type in column (?P<column>[^ ]+)",
        "{name} read NaN in numeric column {column}, which its decimal.handling.mode (precise) "
        "cannot send, so capture of every table of this connector stopped",
        'set "decimal.handling.mode": "string" in the connector file (as `changelake connectors '
        'init` writes it, with "column.propagate.source.type": ".*": numerics stay exact '
        "decimals, and a NaN becomes NULL with a dead letter naming it), then "
        "`changelake connectors apply`",
    ),
    Known(
        "is no longer available on the server",
        "the position Connect stored for {name} is gone from Postgres (its replication slot was "
        "dropped or recreated since, or the WAL it needs was removed)",
        RESYNC_STEP,
    ),
    Known(
        "Compacted topic cannot accept message without key",
        "{name} captures a table without a primary key, whose changes its compacted topic "
        "refuses; capture of every table of this connector stopped",
        "give the table a primary key, or key it by columns that identify a row "
        '("message.key.columns": "<schema>.<table>:<col>,…" in the connector file), or leave it '
        "out of table.include.list; then `changelake connectors apply`",
    ),
    Known(
        "password authentication failed",
        "Postgres refused the login of {name}'s database.user",
        "check the password Connect reads (CHANGELAKE_DEBEZIUM_PASSWORD) and database.user, "
        "then `changelake connectors apply`",
    ),
    Known(
        r"replication slot \S+ is active for PID",
        "another process is reading {name}'s replication slot",
        "stop the other reader (or give this connector its own slot.name), then "
        "`changelake connectors apply`",
    ),
    Known(
        r"publication \S+ does not exist",
        "the publication {name} reads from does not exist in its database",
        "create it (`changelake connectors init` does) or fix publication.name, then "
        "`changelake connectors apply`",
    ),
)
MAX_LINE = 300  # an exception's first line can hold a whole offset context
LOG_HINT = "the full trace is in Connect's log (logs/connect.log under `changelake stack`)"


def root_cause(trace: str, limit: int = 200) -> str:
    """A Java trace's innermost cause (its last `Caused by:`), else its first line."""
    lines = trace.strip().splitlines()
    causes = [line for line in lines if line.startswith("Caused by:")]
    first = causes[-1] if causes else lines[0] if lines else "no trace"
    return _shortened(first.removeprefix("Caused by: "), limit)


def explain(name: str, trace: str) -> tuple[str, str]:
    """(what failed, in one sentence; what to do next) for a failed connector's trace."""
    for known in KNOWN:
        if found := re.search(known.pattern, trace):
            fields = {"name": name, **found.groupdict()}
            return known.sentence.format(**fields), known.next_step.format(**fields)
    lines = trace.strip().splitlines()
    first = _shortened(lines[0], MAX_LINE) if lines else "no reason given"
    cause = root_cause(trace, MAX_LINE) if lines else first
    because = f" (caused by {cause})" if cause != first else ""
    return (
        f"connector {name} failed: {first}{because}",
        f"fix the cause, then `changelake connectors apply`; {LOG_HINT}",
    )


def _shortened(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"
