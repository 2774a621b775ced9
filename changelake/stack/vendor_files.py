"""What `changelake setup` leaves in the vendor folder: stamped folders and unpacked archives."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path


def is_complete(folder: Path, stamp: str) -> bool:
    marker = folder / ".complete"
    return marker.exists() and marker.read_text().strip() == stamp


def unzip(archive: Path, into: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(into)
        # zipfile drops Unix permissions; put the executable bits back.
        for info in zf.infolist():
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(into / info.filename, mode)
