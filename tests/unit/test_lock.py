"""The lock files hold what pyproject.toml asks for: `make setup` installs requirements-dev.lock
and the image requirements.lock, so a package pinned in one place and locked at another version
would be tested at one version and shipped at the other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;]+)")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _pins(lines: list[str]) -> dict[str, str]:
    return {_name(m.group(1)): m.group(2) for line in lines if (m := PIN.match(line.strip()))}


@pytest.mark.parametrize(
    ("lock", "groups"),
    [("requirements.lock", []), ("requirements-dev.lock", ["dev", "bench"])],
)
def test_every_pinned_dependency_is_locked_at_its_pin(lock: str, groups: list[str]) -> None:
    wanted = _pins(
        [
            *PROJECT["dependencies"],
            *(d for g in groups for d in PROJECT["optional-dependencies"][g]),
        ]
    )
    locked = _pins((ROOT / lock).read_text().splitlines())
    assert {n: locked.get(n) for n in wanted} == wanted, f"run `make lock`: {lock} is stale"


def test_the_image_lock_is_the_dev_lock_s_runtime_part() -> None:
    runtime = _pins((ROOT / "requirements.lock").read_text().splitlines())
    dev = _pins((ROOT / "requirements-dev.lock").read_text().splitlines())
    assert {n: dev.get(n) for n in runtime} == runtime  # the image runs what the tests ran
