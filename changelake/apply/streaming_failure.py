"""What a failed streaming query says, shortened to its cause."""

from __future__ import annotations

import re

_CAUSE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")
_WRAPPERS = ("py4j.", "org.apache.spark.sql.execution.streaming.", "java.util.concurrent.")


def cause(failure: str) -> str:
    """The innermost real error in a streaming failure's text (Spark wraps the Python traceback
    of foreachBatch in several layers of its own)."""
    found = [
        m
        for line in failure.splitlines()
        if (m := _CAUSE.match(line.strip())) and not m.group(1).startswith(_WRAPPERS)
    ]
    if found:
        return f"{found[-1].group(1)}: {found[-1].group(2)}"[:500]
    return failure.strip().splitlines()[0][:500] if failure.strip() else "unknown failure"
