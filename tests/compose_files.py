"""Reading the compose files as docker-compose resolves them, and the Dockerfiles they build:
shared by the tests that hold them to the project's sources of truth."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
CONNECT_DOCKERFILE = "docker/connect.Dockerfile"
SMT_SOURCES = ROOT / "connect-smt" / "src" / "main" / "java"
SMT_BUILD = "mvn -q -B -s .mvn/settings.xml -P smt package -DskipTests"
DEBEZIUM_PLUGIN_PATH = PurePosixPath("/kafka/connect")  # KAFKA_CONNECT_PLUGINS_DIR in the image
JAVA_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.MULTILINE)
DOCKER_COMPOSE = shutil.which("docker-compose")
PASSWORDS = {
    "CHANGELAKE_PG_PASSWORD": "dummy-pg-password",
    "CHANGELAKE_DEBEZIUM_PASSWORD": "dummy-debezium-password",
    "CHANGELAKE_SPARK_CONNECT_TOKEN": "dummy-spark-connect-token",
}
ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def run_config(
    env_file: Path, extra_env: Mapping[str, str], *args: str, files: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` with a clean environment: PATH and HOME, plus `extra_env`;
    `files`: compose files merged over docker-compose.yml, as `-f` adds them."""
    assert DOCKER_COMPOSE is not None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra_env)
    return subprocess.run(
        [
            DOCKER_COMPOSE,
            "--project-directory",
            str(ROOT),
            "--env-file",
            str(env_file),
            *(arg for path in (COMPOSE_FILE, *files) for arg in ("-f", str(path))),
            "config",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def resolved(env_file: Path, extra_env: Mapping[str, str], *files: Path) -> dict[str, Any]:
    """The compose files as docker-compose resolves them; fails with its complaint."""
    result = run_config(env_file, extra_env, files=files)
    assert result.returncode == 0, result.stderr
    loaded = yaml.safe_load(result.stdout)
    assert isinstance(loaded, dict)
    return loaded


def empty_env_file(folder: Path) -> Path:
    """An empty --env-file: any .env on the developer's machine stays out of the tests."""
    path = folder / "empty.env"
    path.write_text("")
    return path


def published_ports(service: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) for each published port, short or long syntax."""
    ports = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ip, host, target = entry.get("host_ip", ""), entry["published"], entry["target"]
        else:
            spec = str(entry).split("/")[0]
            parts = spec.split(":")
            assert len(parts) == 3, f"port {entry!r} does not name a host address"
            ip, host, target = parts
        ports.append((str(ip), int(host), int(target)))
    return ports


def bind_mounts(service: Mapping[str, Any]) -> Iterator[tuple[Path, str, bool]]:
    """(host path, container path, read-only) for each bind mount, short or long syntax."""
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            if entry.get("type") == "bind":
                yield Path(entry["source"]), entry["target"], bool(entry.get("read_only"))
        else:
            source, target, *mode = str(entry).split(":")
            if source.startswith("/"):
                yield Path(source), target, "ro" in mode


def env_of(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(key): str(value) for key, value in env.items()}


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (INSTRUCTION, arguments)


def parse_dockerfile(path: Path) -> tuple[dict[str, str], list[Stage]]:
    """(the ARG defaults declared before the first FROM, the stages in order)."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, f"{path} ends inside a continued line"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), " ".join(rest.split())
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name))
        elif not stages:
            assert keyword == "ARG", f"{path}: {line!r} before the first FROM"
            arg, _, default = rest.partition("=")
            global_args[arg] = default
        else:
            stages[-1].instructions.append((keyword, rest))
    return global_args, stages


def substitute(text: str, values: Mapping[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], text)


def docker_ignored(relative: str, patterns: list[str]) -> bool:
    """Whether the build context leaves `relative` out (Docker's rules: the last matching line
    wins, a pattern matching a parent folder matches what is inside it, ** spans folders)."""

    def matches(pattern: str, path: str) -> bool:
        pat, parts = PurePosixPath(pattern).parts, PurePosixPath(path).parts
        if not pat:
            return False
        if pat[0] == "**":
            return any(matches("/".join(pat[1:]), "/".join(parts[i:])) for i in range(len(parts)))
        return (
            bool(parts)
            and fnmatch.fnmatchcase(parts[0], pat[0])
            and (len(pat) == 1 or matches("/".join(pat[1:]), "/".join(parts[1:])))
        )

    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if matches(pattern.lstrip("!").strip("/"), relative):
            ignored = not negated
    return ignored


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]
