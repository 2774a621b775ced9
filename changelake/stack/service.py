"""What every local service has in common: where it keeps things, how it starts, stops, and says
it is healthy. One subclass per service (postgres.py, kafka.py, connect.py, opensearch.py)."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from changelake.settings import Settings
from changelake.stack import process
from changelake.stack.exceptions import NotInstalledError, ServiceError


def service_user(settings: Settings) -> str | None:
    """Root runs the services as the unprivileged service user; anyone else runs them as self."""
    return settings.service_user if os.geteuid() == 0 else None


def ensure_service_user(settings: Settings) -> None:
    user = service_user(settings)
    if user is None:
        return
    try:
        pwd.getpwnam(user)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user],
            check=True,
        )


def chown_tree(path: Path, user: str | None) -> None:
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.lchown(path, entry.pw_uid, entry.pw_gid)


class Service(ABC):
    name: ClassVar[str]
    port_env: ClassVar[str]
    start_timeout_s: ClassVar[float] = 120.0
    stop_grace_s: ClassVar[float] = 60.0
    stop_signal: ClassVar[int] = signal.SIGTERM

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.user = service_user(settings)

    # -- where things live --------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self.settings.home / self.name

    @property
    def log(self) -> Path:
        return self.settings.logs / f"{self.name}.log"

    @property
    def pidfile(self) -> Path:
        return self.settings.run_dir / f"{self.name}.pid"

    @property
    @abstractmethod
    def port(self) -> int: ...

    # -- lifecycle ----------------------------------------------------------------------
    @abstractmethod
    def check_installed(self) -> None:
        """Raise NotInstalledError naming what is missing."""

    @abstractmethod
    def prepare(self) -> None:
        """Write configuration and initialise data, idempotently."""

    @abstractmethod
    def command(self) -> list[str]: ...

    def environment(self) -> dict[str, str]:
        return {}

    @abstractmethod
    def healthy(self) -> bool: ...

    def after_start(self) -> None:  # noqa: B027 - most services need nothing here
        """Work that needs the running service (roles, schemas); must be idempotent."""

    @abstractmethod
    def endpoint(self) -> dict[str, Any]: ...

    # -- shared helpers -----------------------------------------------------------------
    def spec(self) -> process.ProcessSpec:
        return process.ProcessSpec(
            name=self.name,
            argv=self.command(),
            log=self.log,
            pidfile=self.pidfile,
            cwd=self.dir,
            env=self.environment(),
            user=self.user,
            stop_signal=self.stop_signal,
        )

    def pid(self) -> int | None:
        return process.running_pid(self.pidfile)

    def make_dir(self, *parts: str) -> Path:
        path = self.dir.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def own_dir(self) -> None:
        """Hand the service's own folder to the user it runs as."""
        chown_tree(self.dir, self.user)

    def failure(self, message: str, hint: str | None = None) -> ServiceError:
        return ServiceError(
            self.name, message, hint=hint, log=self.log, log_tail=process.log_tail(self.log)
        )

    def require_path(self, path: Path, what: str) -> None:
        if not path.exists():
            raise NotInstalledError(
                f"{self.name}: {what} is missing ({path})",
                "run `make setup` (it fetches every pinned service once; nothing is fetched later)",
            )


class JavaService(Service):
    """A service run as `java -cp <vendor folder>/* <main class>`."""

    vendor_folder: ClassVar[str]
    main_class: ClassVar[str]

    @property
    def java(self) -> Path:
        return self.settings.java_home / "bin" / "java"

    @property
    def jars(self) -> Path:
        return self.settings.vendor / self.vendor_folder

    def check_installed(self) -> None:
        self.require_path(self.java, "Java 17 (set JAVA_HOME)")
        self.require_path(self.jars / ".complete", f"the {self.vendor_folder} jars")

    def java_command(self, heap: str, *args: str) -> list[str]:
        return [
            str(self.java),
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.write_log4j()}",
            "-cp",
            f"{self.jars}/*",
            self.main_class,
            *args,
        ]

    def write_log4j(self) -> Path:
        # Log4j 2 with no configuration prints almost nothing: log INFO to stdout, which `start`
        # sends to logs/<service>.log.
        path = self.dir / "log4j2.properties"
        path.write_text(
            "status = warn\n"
            "appender.console.type = Console\n"
            "appender.console.name = STDOUT\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.stdout.ref = STDOUT\n"
            "logger.kafka.name = org.apache.kafka\n"
            "logger.kafka.level = WARN\n"
            "logger.connect.name = org.apache.kafka.connect.runtime\n"
            "logger.connect.level = INFO\n"
            "logger.reflections.name = org.reflections\n"
            "logger.reflections.level = ERROR\n"
        )
        return path
