"""A `changelake run` in its own process group, so a fault can SIGKILL it with its Spark JVM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from changelake.exceptions import ChangelakeError

STOP_GRACE_S = 120.0
TAIL_LINES = 30


class PipelineProcess:
    def __init__(self, env: Mapping[str, str], log: Path, args: tuple[str, ...] = ()) -> None:
        self.env, self.log, self.args = dict(env), log, args
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:  # every incarnation appends to one log
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "changelake.cli", "run", *self.args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    @property
    def pid(self) -> int:
        return self._running().pid

    def kill(self) -> None:
        """SIGKILL: no handler runs, no batch finishes, no checkpoint is written."""
        proc = self._running()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)

    def check_alive(self) -> None:
        """A pipeline that exits by itself under faults has given up: that is a finding."""
        self._running()

    def alive(self) -> bool:
        """True while it runs; raises, with the run's last lines, once it has exited (for a
        wait's condition)."""
        self._running()
        return True

    def _running(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise ChangelakeError("chaos: the pipeline was never started")
        code = self.proc.poll()
        if code is not None:
            raise ChangelakeError(
                f"chaos: `changelake run` exited by itself with code {code}; its last lines:\n"
                + self.tail(),
                hint=f"the whole log is {self.log}",
            )
        return self.proc

    def tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(lines[-TAIL_LINES:])
