"""JSON files: read one (an error names the file, line and column), or write one whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from changelake.exceptions import ConfigError


def read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {exc.lineno} column {exc.colno}: not JSON: {exc.msg}"
        ) from exc


def write_atomically(path: Path, doc: Any, mode: int | None = None) -> None:
    """Write `doc` so a reader (or a process killed mid-write) sees the old file or the new one,
    never half of one: a temporary file beside it, then a rename. `mode`: the file's
    permissions, set before anything is written (for a file holding a secret)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    if mode is not None:
        tmp.unlink(missing_ok=True)
        tmp.touch(mode=mode)
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)
