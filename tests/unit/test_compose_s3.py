"""docker-compose.s3.yml, merged over docker-compose.yml as `-f … -f …` merges it: the pipeline's
lake and checkpoints on the `s3` service, reached by name, with the keys the server was given,
in a bucket the server makes; the server at the version the tests build (pom.xml)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from changelake.settings import Settings, load_settings, read_versions
from changelake.spark import s3a_conf
from tests.compose_files import (
    DOCKER_COMPOSE,
    PASSWORDS,
    ROOT,
    empty_env_file,
    env_of,
    published_ports,
    resolved,
    run_config,
)

pytestmark = pytest.mark.skipif(DOCKER_COMPOSE is None, reason="docker-compose is not installed")

S3_FILE = ROOT / "docker-compose.s3.yml"
KEYS = {"CHANGELAKE_S3_ACCESS_KEY": "dummy-access", "CHANGELAKE_S3_SECRET_KEY": "dummy-secret"}


@pytest.fixture(scope="module")
def env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return empty_env_file(tmp_path_factory.mktemp("compose-s3"))


@pytest.fixture(scope="module")
def services(env_file: Path) -> dict[str, dict[str, Any]]:
    return dict(resolved(env_file, {**PASSWORDS, **KEYS}, S3_FILE)["services"])


@pytest.mark.parametrize("missing", sorted(KEYS))
def test_config_fails_naming_a_missing_key(env_file: Path, missing: str) -> None:
    keys = {name: value for name, value in KEYS.items() if name != missing}
    result = run_config(env_file, {**PASSWORDS, **keys}, files=(S3_FILE,))
    assert result.returncode != 0
    assert f"{missing} is not set" in result.stderr


def test_the_server_is_the_version_the_tests_build(services: dict[str, dict[str, Any]]) -> None:
    versions = read_versions(ROOT / "pom.xml")
    assert services["s3"]["image"] == f"versity/versitygw:{versions.versitygw}"


IMAGE_BINARY = "/usr/local/bin/versitygw"


def test_the_server_binary_is_where_the_image_puts_it() -> None:
    """The image's own Dockerfile (in the Go module `make setup` builds the server from, at the
    pinned version) copies the binary to IMAGE_BINARY: the entrypoint runs it by that path."""
    version = read_versions(ROOT / "pom.xml").versitygw
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain: the versitygw module is not on this machine")
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True)
    dockerfile = Path(cache.stdout.strip()) / f"github.com/versity/versitygw@{version}/Dockerfile"
    if not dockerfile.exists():
        pytest.skip(f"{dockerfile} is not downloaded (`make setup` builds the server)")
    copied = re.findall(r"^COPY --from=\S+ \S+/versitygw (\S+)$", dockerfile.read_text(), re.M)
    assert copied == [IMAGE_BINARY], dockerfile


def server_command(service: dict[str, Any]) -> list[str]:
    """The versitygw command line the service's entrypoint execs, and what runs before it."""
    entry = service["entrypoint"]
    assert entry[:2] == ["/bin/sh", "-c"], entry
    return shlex.split(entry[2])


def test_the_pipeline_keeps_lake_and_checkpoints_in_the_servers_bucket(
    services: dict[str, dict[str, Any]],
) -> None:
    pipeline, s3 = services["pipeline"], services["s3"]
    env = env_of(pipeline)
    theirs: Settings = load_settings(env)  # as the CLI in the container reads it
    lake, checkpoints = urlparse(theirs.lake), urlparse(theirs.checkpoints)
    assert lake.scheme == checkpoints.scheme == "s3a"
    assert lake.netloc == checkpoints.netloc

    # The endpoint is the service, by name, on the port its server listens on (not loopback).
    endpoint = urlparse(theirs.s3_endpoint)
    assert endpoint.hostname == "s3" and endpoint.hostname in services
    words = server_command(s3)
    served = words[words.index("exec") + 1 :]
    assert served[0] == IMAGE_BINARY
    port = int(served[served.index("--port") + 1].rsplit(":", 1)[1])
    assert endpoint.port == port
    assert [target for *_, target in published_ports(s3)] == [port]

    # The bucket is made in the folder the posix backend serves, which is a volume.
    root = served[served.index("posix") + 1]
    assert f"mkdir -p {root}/{lake.netloc}" in s3["entrypoint"][2]
    targets = {v["target"] if isinstance(v, dict) else str(v).split(":")[1] for v in s3["volumes"]}
    assert root in targets

    # The keys S3A signs with are the ones the server was started with.
    conf = s3a_conf(theirs, env)
    server_env = env_of(s3)
    assert conf["spark.hadoop.fs.s3a.access.key"] == server_env["ROOT_ACCESS_KEY_ID"]
    assert conf["spark.hadoop.fs.s3a.secret.key"] == server_env["ROOT_SECRET_ACCESS_KEY"]
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"

    assert pipeline["depends_on"]["s3"]["condition"] == "service_healthy"
    assert s3["healthcheck"]["test"]


def test_the_base_file_alone_needs_no_s3_keys(env_file: Path) -> None:
    result = run_config(env_file, PASSWORDS)
    assert result.returncode == 0, result.stderr
    assert not re.search(r"CHANGELAKE_S3_", (ROOT / "docker-compose.yml").read_text())
