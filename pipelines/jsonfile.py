"""Read a JSON configuration file, or fail with an error naming the file (and line and column)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelines.exceptions import ConfigError


def read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: line {exc.lineno} column {exc.colno}: not JSON: {exc.msg}"
        ) from exc
