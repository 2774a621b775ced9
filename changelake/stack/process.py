"""Start, find and stop one detached service process, with its pid file and log.

A service runs in its own session (so it outlives the `changelake` command that started it) and,
when we are root, as the unprivileged service user: Postgres and OpenSearch refuse root, and the
others have no need for it.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from changelake.stack.exceptions import ServiceError
from changelake.waiting import alive, wait_until


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: Sequence[str]
    log: Path
    pidfile: Path
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None
    stop_signal: int = signal.SIGTERM


def running_pid(pidfile: Path) -> int | None:
    """The pid recorded in `pidfile` if that process is still alive (and not a zombie)."""
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive(pid) else None


def start(spec: ProcessSpec) -> int:
    spec.log.parent.mkdir(parents=True, exist_ok=True)
    spec.pidfile.parent.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **spec.env}
    uid = gid = None
    if spec.user is not None:
        entry = pwd.getpwnam(spec.user)
        uid, gid = entry.pw_uid, entry.pw_gid
        env["HOME"] = str(spec.cwd)
        env["USER"] = spec.user
    with spec.log.open("ab") as log:
        proc = subprocess.Popen(
            list(spec.argv),
            cwd=spec.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=uid,
            group=gid,
            extra_groups=None if uid is None else [],
        )
    pid: int = proc.pid
    spec.pidfile.write_text(f"{pid}\n")
    return pid


def stop(pidfile: Path, sig: int, grace_s: float) -> str:
    """Ask the process to stop, wait up to `grace_s`, then SIGKILL. Returns how it ended."""
    pid = running_pid(pidfile)
    if pid is None:
        pidfile.unlink(missing_ok=True)
        return "not running"
    _signal_group(pid, sig)
    if _wait_gone(pid, grace_s):
        outcome = "stopped"
    else:
        _signal_group(pid, signal.SIGKILL)
        _wait_gone(pid, 10)
        outcome = f"killed after {grace_s:.0f}s"
    pidfile.unlink(missing_ok=True)
    return outcome


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout_s: float) -> bool:
    def gone() -> bool:
        try:
            # Reap it if it is our child (the `up` that started it may still be running).
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        return not alive(pid)

    return wait_until(gone, timeout_s, interval_s=0.1)


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def require_free_port(service: str, host: str, port: int, env_name: str) -> None:
    if port_open(host, port):
        raise ServiceError(
            service,
            f"port {port} on {host} is already taken by another process",
            hint=f"stop that process, or choose another port with {env_name}=<port>",
        )
