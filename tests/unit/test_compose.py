"""docker-compose.yml agrees with pom.xml, changelake/settings.py and connectors/*.json.

No service is started: `docker-compose config` validates and resolves the file (interpolation,
anchors, relative paths), and the tests compare what it resolved with the project's own sources of
truth. Any .env on the developer's machine is ignored (an empty --env-file stands in for it).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from changelake import kafka_security
from changelake.apply.run import STOP_WITHIN_S
from changelake.capture.source import source_of
from changelake.settings import (
    CONNECT_CONFIG_TOPIC,
    CONNECT_OFFSETS_TOPIC,
    CONNECT_RECORD_LIMITS,
    CONNECT_STATUS_TOPIC,
    KAFKA_RECORD_LIMITS,
    POSTGRES_REPLICATION,
    Settings,
    dotenv_defaults,
    load_settings,
    read_versions,
)
from changelake.stack.install import SMT_FOLDER
from tests import compose_files
from tests.compose_files import (
    COMPOSE_FILE,
    CONNECT_DOCKERFILE,
    DEBEZIUM_PLUGIN_PATH,
    DOCKER_COMPOSE,
    ENV_EXAMPLE,
    ENV_REFERENCE,
    JAVA_PACKAGE,
    PASSWORDS,
    ROOT,
    SMT_BUILD,
    SMT_SOURCES,
    bind_mounts,
    docker_ignored,
    dockerignore_patterns,
    env_of,
    parse_dockerfile,
    published_ports,
    resolved,
    run_config,
    substitute,
)
from tests.support import pom_property

pytestmark = pytest.mark.skipif(
    DOCKER_COMPOSE is None,
    reason="docker-compose is not installed (`make setup` installs it; on Debian: "
    "apt-get install docker-compose)",
)


@pytest.fixture(scope="module")
def empty_env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compose_files.empty_env_file(tmp_path_factory.mktemp("compose"))


@pytest.fixture(scope="module")
def config(empty_env_file: Path) -> dict[str, Any]:
    return resolved(empty_env_file, PASSWORDS)


@pytest.fixture(scope="module")
def services(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(config["services"])


@pytest.fixture(scope="module")
def settings() -> Settings:
    return load_settings({})  # the defaults, whatever this shell exports


def test_config_is_valid_with_the_passwords_set(empty_env_file: Path) -> None:
    result = run_config(empty_env_file, PASSWORDS, "-q")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("missing", sorted(PASSWORDS))
def test_config_fails_naming_a_missing_password(empty_env_file: Path, missing: str) -> None:
    others = {name: value for name, value in PASSWORDS.items() if name != missing}
    result = run_config(empty_env_file, others, "-q")
    assert result.returncode != 0
    assert f"{missing} is not set" in result.stderr


def test_env_example_names_every_password_with_no_value() -> None:
    values = dict(
        line.split("=", 1)
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    assert {name: values.get(name) for name in PASSWORDS} == dict.fromkeys(PASSWORDS, "")
    # and so a copied, unedited .env.example is refused:
    result = run_config(ENV_EXAMPLE, {}, "-q")
    assert result.returncode != 0
    assert re.search(r"CHANGELAKE_\w*PASSWORD is not set", result.stderr), result.stderr


def test_no_password_has_a_default_in_the_compose_file() -> None:
    """The stack's own passwords and token are required (`:?`); the optional logins to a
    secured OpenSearch or Kafka of the user's default to empty, never to a value."""
    text = COMPOSE_FILE.read_text()
    uses = re.findall(r"\$\{(CHANGELAKE_\w*(?:PASSWORD|TOKEN))(:?[-?+])?([^}]*)\}", text)
    required = {name: op for name, op, _ in uses if name in PASSWORDS}
    assert required == dict.fromkeys(PASSWORDS, ":?")
    optional = {name: (op, default) for name, op, default in uses if name not in PASSWORDS}
    assert optional == dict.fromkeys(
        ("CHANGELAKE_OPENSEARCH_PASSWORD", "CHANGELAKE_KAFKA_PASSWORD"), (":-", "")
    )


def test_the_clients_of_a_secured_opensearch_and_kafka_get_the_env_files_settings(
    tmp_path: Path,
) -> None:
    """What .env sets for a secured OpenSearch or Kafka reaches both services that run the CLI,
    as its own Settings and Kafka security read them."""
    env_file = tmp_path / ".env"
    secured = {
        "CHANGELAKE_OPENSEARCH_TLS": "true",
        "CHANGELAKE_OPENSEARCH_USER": "changelake",
        "CHANGELAKE_OPENSEARCH_PASSWORD": "dummy-search-password",
        "CHANGELAKE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "CHANGELAKE_KAFKA_USER": "changelake",
        "CHANGELAKE_KAFKA_PASSWORD": "dummy-kafka-password",
    }
    env_file.write_text("".join(f"{k}={v}\n" for k, v in {**PASSWORDS, **secured}.items()))
    services = resolved(env_file, {})["services"]
    for name in ("connectors", "pipeline"):  # both reach Kafka
        kafka = kafka_security.from_env(env_of(services[name])).librdkafka()
        assert kafka["security.protocol"] == "SASL_PLAINTEXT", name
        assert kafka["sasl.password"] == "dummy-kafka-password", name
    env = env_of(services["pipeline"])  # only `run` writes the index
    theirs = load_settings(env)
    assert theirs.opensearch_url.startswith("https://opensearch:")
    assert theirs.opensearch_user == "changelake"
    assert env["CHANGELAKE_OPENSEARCH_PASSWORD"] == "dummy-search-password"


def test_images_are_the_versions_pinned_in_pom(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    versions = read_versions(settings.root / "pom.xml")
    pulled = {name: svc["image"] for name, svc in services.items() if "build" not in svc}
    # `demo` runs the image the pipeline service builds (and tags), not one pulled
    assert pulled.pop("demo") == services["pipeline"]["image"]
    postgres = pulled.pop("postgres")
    assert postgres == pom_property(settings.root / "pom.xml", "postgres.image")
    # the same major release as the local stack's Debian packages
    assert re.split(r"[:.-]", postgres)[1] == versions.postgres_major
    assert pulled == {
        "kafka": f"apache/kafka:{versions.kafka}",
        "opensearch": f"opensearchproject/opensearch:{versions.opensearch}",
        "prometheus": pom_property(settings.root / "pom.xml", "prometheus.image"),
        "grafana": pom_property(settings.root / "pom.xml", "grafana.image"),
    }


@pytest.mark.parametrize("dockerfile", ["Dockerfile", CONNECT_DOCKERFILE])
def test_dockerfiles_build_on_images_pinned_in_pom(dockerfile: str, settings: Settings) -> None:
    """No floating tag (`python:3.11-slim`, `maven:3.9-…`): every base is a pom.xml property,
    or Debezium's image at the pom's version."""
    pom = settings.root / "pom.xml"
    pinned = {pom_property(pom, name) for name in ("python.image", "maven.image")}
    debezium = f"quay.io/debezium/connect:{read_versions(pom).debezium}"
    global_args, stages = parse_dockerfile(ROOT / dockerfile)
    for stage in stages:
        base = substitute(stage.base, global_args)
        assert base in pinned | {debezium}, f"{dockerfile}: FROM {stage.base} is not pinned"


def test_services_restart_after_a_crash_or_a_reboot(services: dict[str, dict[str, Any]]) -> None:
    """Every long-running service comes back by itself; the one-shot registration does not
    loop (it exits 0 when done, and a failure is for a person to read)."""
    for name, svc in services.items():
        expected = "no" if name in ("connectors", "demo") else "unless-stopped"
        assert svc.get("restart") == expected, name


def test_pipeline_healthcheck_is_the_cli_status_of_its_own_process(
    services: dict[str, dict[str, Any]],
) -> None:
    """Healthy while `changelake run` runs with no table stopped or failed: `status --pipeline`
    reads the run's own state file (no Spark session, no service calls every interval)."""
    check = services["pipeline"]["healthcheck"]
    assert check["test"] == ["CMD", "changelake", "status", "--pipeline"]
    # a snapshot's first minutes are not a failure
    assert _seconds(check["start_period"]) >= 60


def test_the_pipeline_gets_longer_to_stop_than_a_stopping_run_takes(
    services: dict[str, dict[str, Any]],
) -> None:
    """Docker kills the container stop_grace_period after SIGTERM: the run must have ended."""
    assert _seconds(services["pipeline"]["stop_grace_period"]) > STOP_WITHIN_S


def test_prometheus_reaches_the_pipeline_s_metrics_on_the_compose_network(
    services: dict[str, dict[str, Any]],
) -> None:
    """The pipeline serves on every interface of its container (loopback would hide it from
    the prometheus service), at the port docker/prometheus/prometheus.yml scrapes."""
    theirs = load_settings(env_of(services["pipeline"]))
    assert theirs.metrics_bind == "0.0.0.0" and theirs.metrics_port
    scraped = (ROOT / "docker/prometheus/prometheus.yml").read_text()
    assert f'"pipeline:{theirs.metrics_port}"' in scraped
    mounts = {target: source for source, target, _ in bind_mounts(services["prometheus"])}
    assert (
        Path(mounts["/etc/prometheus/prometheus.yml"]) == ROOT / "docker/prometheus/prometheus.yml"
    )
    grafana = {target: source for source, target, _ in bind_mounts(services["grafana"])}
    assert Path(grafana["/var/lib/grafana/dashboards"]) == ROOT / "docker/grafana/dashboards"
    assert Path(grafana["/etc/grafana/provisioning"]) == ROOT / "docker/grafana/provisioning"


def test_each_password_reaches_only_the_services_that_log_in_with_it(
    services: dict[str, dict[str, Any]],
) -> None:
    """The superuser's: Postgres itself, and `demo`, which writes the shop's rows. The connector
    role's: Postgres (which creates it), Connect, and whoever reads the source as Debezium does."""
    holders = {
        secret: {name for name, svc in services.items() if value in env_of(svc).values()}
        for secret, value in PASSWORDS.items()
    }
    assert holders == {
        "CHANGELAKE_PG_PASSWORD": {"postgres", "demo"},
        "CHANGELAKE_DEBEZIUM_PASSWORD": {"postgres", "connect", "connectors", "pipeline"},
        "CHANGELAKE_SPARK_CONNECT_TOKEN": {"pipeline"},  # and the host's CLI, from .env
    }
    demo = services["demo"]
    assert demo["profiles"] == ["demo"]  # run on demand, never by `up`
    assert demo["entrypoint"] == [*_image_entrypoint(), "demo"]


def _image_entrypoint() -> list[str]:
    """The pipeline image's ENTRYPOINT, from the Dockerfile."""
    text = (ROOT / "Dockerfile").read_text()
    match = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", text, re.M)
    assert match, "the Dockerfile has no ENTRYPOINT"
    entry: list[str] = json.loads(match.group(1))
    return entry


def _seconds(value: str | int) -> float:
    """A compose duration (`90s`, `2m`, `1m30s`) in seconds."""
    if isinstance(value, int):
        return value / 1e9  # `docker-compose config` may resolve durations to nanoseconds
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value)
    assert parts, value
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[unit] for n, unit in parts)


def test_built_services_use_the_repository_dockerfiles(
    services: dict[str, dict[str, Any]],
) -> None:
    built = {
        name: svc["build"].get("dockerfile", "Dockerfile")
        for name, svc in services.items()
        if "build" in svc
    }
    assert built == {
        "connectors": "Dockerfile",
        "pipeline": "Dockerfile",
        "connect": CONNECT_DOCKERFILE,
    }
    for name, dockerfile in built.items():
        assert Path(services[name]["build"]["context"]).resolve() == ROOT, name
        assert (ROOT / dockerfile).is_file(), dockerfile


def test_connect_is_built_on_debezium_at_the_pom_version(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    debezium = read_versions(settings.root / "pom.xml").debezium
    svc = services["connect"]
    assert svc["build"].get("args") == {"DEBEZIUM_VERSION": debezium}
    assert svc["image"] == f"changelake/connect:{debezium}"
    global_args, stages = parse_dockerfile(ROOT / CONNECT_DOCKERFILE)
    assert global_args == {"DEBEZIUM_VERSION": debezium}  # the default, for a plain docker build
    final_base = stages[-1].base
    assert substitute(final_base, global_args) == f"quay.io/debezium/connect:{debezium}"
    assert substitute(final_base, svc["build"]["args"]) == f"quay.io/debezium/connect:{debezium}"


def test_connect_dockerfile_builds_the_smt_and_copies_its_jar_into_the_plugin_path() -> None:
    _, stages = parse_dockerfile(ROOT / CONNECT_DOCKERFILE)
    builders = [
        stage
        for stage in stages[:-1]
        if any(kw == "RUN" and SMT_BUILD in args for kw, args in stage.instructions)
    ]
    assert [stage.name for stage in builders] == ["smt"], "one named stage runs " + SMT_BUILD
    builder = builders[0]
    copied = {
        tuple(shlex.split(args)[:-1])
        for kw, args in builder.instructions
        if kw == "COPY" and not args.startswith("--")
    }
    assert copied == {
        ("pom.xml",),
        (".mvn/settings.xml",),
        ("connect-smt/pom.xml",),
        ("connect-smt/src",),
    }
    run = " ".join(args for kw, args in builder.instructions if kw == "RUN")
    assert "connect-smt/target/changelake-connect-smt-*.jar /out/changelake-smt/" in run
    folder = PurePosixPath(SMT_FOLDER).name  # the same folder name as the local stack's
    from_builder = [
        shlex.split(args)
        for kw, args in stages[-1].instructions
        if kw == "COPY" and args.startswith(f"--from={builder.name} ")
    ]
    assert from_builder == [
        [f"--from={builder.name}", "/out/changelake-smt/", f"{DEBEZIUM_PLUGIN_PATH / folder}/"]
    ]


def test_the_pipeline_image_leaves_the_benchmark_and_chaos_out() -> None:
    """They run from a checkout; the runtime, the CLI and the demo (compose's `demo`) stay."""
    patterns = dockerignore_patterns()
    assert docker_ignored("changelake/bench/command.py", patterns)
    assert docker_ignored("changelake/chaos/runner.py", patterns)
    kept = ["changelake/apply/run.py", "changelake/cli.py", "changelake/demo/seed.py"]
    assert [path for path in kept if docker_ignored(path, patterns)] == []


def test_build_context_holds_what_the_connect_dockerfile_copies() -> None:
    patterns = dockerignore_patterns()
    needed = [
        "pom.xml",
        ".mvn/settings.xml",
        "connect-smt/pom.xml",
        *(
            path.relative_to(ROOT).as_posix()
            for path in (ROOT / "connect-smt" / "src").rglob("*")
            if path.is_file()
        ),
    ]
    assert any(path.endswith(".java") for path in needed)
    assert [path for path in needed if docker_ignored(path, patterns)] == []
    left_out = [
        "connect-smt/target/changelake-connect-smt-0.1.0.jar",
        "connect-smt/target/classes/dev/changelake/connect/KeyTruncates.class",
        ".env",
        ".git/config",
    ]
    assert [path for path in left_out if not docker_ignored(path, patterns)] == []


PLUGIN_KEYS = {  # a connector config key naming a plugin class → the plugin's interface
    "org.apache.kafka.connect.transforms.Transformation": r"transforms\.[^.]+\.type",
    "org.apache.kafka.connect.storage.Converter": r"(key|value)\.converter",
}


def java_types_under(root: Path) -> dict[str, Path]:
    """Fully qualified name of each top-level type -> its .java file (named after the type)."""
    found = {}
    for path in sorted(root.rglob("*.java")):
        text = path.read_text()
        package = JAVA_PACKAGE.search(text)
        assert package, f"{path} declares no package"
        declared = re.search(rf"\b(class|interface|enum|record)\s+{re.escape(path.stem)}\b", text)
        assert declared, f"{path} does not declare {path.stem}"
        found[f"{package.group(1)}.{path.stem}"] = path
    return found


def test_changelake_plugins_in_the_connectors_are_defined_in_connect_smt(
    settings: Settings,
) -> None:
    files = sorted(settings.connectors_dir.glob("*.json"))
    used = {
        str(value): kind
        for path in files
        for key, value in json.loads(path.read_text())["config"].items()
        for kind, pattern in PLUGIN_KEYS.items()
        if re.fullmatch(pattern, key) and str(value).startswith("dev.changelake.")
    }
    transformation = "org.apache.kafka.connect.transforms.Transformation"
    assert used == {
        "dev.changelake.connect.KeyTruncates": transformation,
        "dev.changelake.connect.StampPosition": transformation,
        "dev.changelake.connect.LeanJsonConverter": "org.apache.kafka.connect.storage.Converter",
    }
    defined = java_types_under(SMT_SOURCES)
    outer = {name: name.split("$")[0] for name in used}  # Outer$Inner lives in Outer.java
    assert {name: defined.get(outer[name]) for name in used} == {
        name: SMT_SOURCES.joinpath(*outer[name].split(".")).with_suffix(".java") for name in used
    }
    # Connect finds plugins by their service files (plugin.discovery): each must be listed.
    services = SMT_SOURCES.parent / "resources" / "META-INF" / "services"
    for name, interface in used.items():
        assert name in (services / interface).read_text().split(), (name, interface)


def test_published_ports_are_the_settings_defaults_on_loopback(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    expected = {
        "postgres": settings.postgres_port,
        "kafka": settings.kafka_port,
        "connect": settings.connect_port,
        "opensearch": settings.opensearch_port,
        # a query's warm session, and the endpoint a query asks it through (/served)
        "pipeline": [settings.spark_connect_port, settings.metrics_port],
        # the compose file's own monitoring, which the CLI never calls: their images' ports
        "prometheus": 9090,
        "grafana": 3000,
    }
    published = {name: published_ports(svc) for name, svc in services.items() if "ports" in svc}
    assert {name: [(ip, host) for ip, host, _ in ports] for name, ports in published.items()} == {
        name: [("127.0.0.1", p) for p in (port if isinstance(port, list) else [port])]
        for name, port in expected.items()
    }


def test_host_queries_reach_the_pipeline_s_warm_session(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    """`changelake query` on the host asks the container at its published metrics port and
    connects to its published Spark Connect port with the token both read from .env: the
    container must serve both on an interface the publishing reaches, at the ports published,
    and expect that token."""
    theirs = load_settings(env_of(services["pipeline"]))
    assert theirs.spark_connect_bind == "0.0.0.0" and theirs.metrics_bind == "0.0.0.0"
    assert theirs.spark_connect_token == PASSWORDS["CHANGELAKE_SPARK_CONNECT_TOKEN"]
    published = {inside: host for _, host, inside in published_ports(services["pipeline"])}
    assert published[theirs.spark_connect_port] == settings.spark_connect_port
    assert published[theirs.metrics_port] == settings.metrics_port
    assert "CHANGELAKE_SPARK_CONNECT_TOKEN=" in (ROOT / ".env.example").read_text().splitlines()


def test_kafka_is_single_node_kraft_without_auto_topic_creation(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    env = env_of(services["kafka"])
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    for name, value in env.items():
        if name.endswith(("REPLICATION_FACTOR", "MIN_ISR", "MIN_INSYNC_REPLICAS")):
            assert value == "1", name
    advertised = {url.split("://", 1)[1] for url in env["KAFKA_ADVERTISED_LISTENERS"].split(",")}
    # a client on the host (the published port) and one in the network (the pipeline's settings)
    assert f"127.0.0.1:{settings.kafka_port}" in advertised
    pipeline = env_of(services["pipeline"])
    assert f"{pipeline['CHANGELAKE_KAFKA_HOST']}:{settings.kafka_port}" in advertised
    assert env_of(services["connect"])["BOOTSTRAP_SERVERS"] in advertised


def test_kafka_and_connect_carry_records_as_large_as_the_local_stack_s(
    services: dict[str, dict[str, Any]],
) -> None:
    """A row of large TOASTed values is one large change record: the broker and Connect's
    producer take what the local stack's do (changelake/settings.py), not Kafka's 1 MB."""
    kafka, worker = env_of(services["kafka"]), env_of(services["connect"])
    for name, value in KAFKA_RECORD_LIMITS.items():
        assert kafka["KAFKA_" + name.upper().replace(".", "_")] == value, name
    for name, value in CONNECT_RECORD_LIMITS.items():
        assert worker["CONNECT_" + name.upper().replace(".", "_")] == value, name


def test_postgres_is_configured_for_logical_decoding(services: dict[str, dict[str, Any]]) -> None:
    command = services["postgres"]["command"]
    assert isinstance(command, list)
    assert command[0] == "postgres"
    options = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "-c")
    # the local stack's values, declared once
    assert {k: options.get(k) for k in POSTGRES_REPLICATION} == POSTGRES_REPLICATION
    env = env_of(services["postgres"])
    assert (env["POSTGRES_USER"], env["POSTGRES_DB"]) == ("changelake", "shop")
    assert env["POSTGRES_PASSWORD"] == PASSWORDS["CHANGELAKE_PG_PASSWORD"]
    assert env["CHANGELAKE_DEBEZIUM_PASSWORD"] == PASSWORDS["CHANGELAKE_DEBEZIUM_PASSWORD"]


def test_postgres_init_runs_the_schema_files(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    mounts = {target: (source, ro) for source, target, ro in bind_mounts(services["postgres"])}
    init_scripts = [t for t in mounts if t.startswith("/docker-entrypoint-initdb.d/")]
    assert len(init_scripts) == 1
    script_source = mounts[init_scripts[0]][0]
    assert script_source.is_file()
    script = script_source.read_text()
    schema_targets = [t for t, (src, _) in mounts.items() if src.resolve() == settings.schemas_dir]
    assert len(schema_targets) == 1
    assert mounts[schema_targets[0]][1], "schemas/ must be mounted read-only"
    assert schema_targets[0] in script
    assert script.index("shop.sql") < script.index("capture.sql")
    assert "-v debezium_password=" in script
    assert "-v publication=" in script


def test_connectors_service_reads_the_repository_connectors_folder(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    svc = services["connectors"]
    assert svc["command"] == ["connectors", "apply"]
    mounts = {Path(target): (source, ro) for source, target, ro in bind_mounts(svc)}
    in_container = Path(svc["working_dir"]) / settings.connectors_dir.name
    assert in_container in mounts
    source, read_only = mounts[in_container]
    assert source.resolve() == settings.connectors_dir.resolve()
    assert read_only
    assert env_of(svc)["CHANGELAKE_CONNECT_HOST"] == "connect"
    assert svc["depends_on"]["connect"]["condition"] == "service_healthy"


def test_connect_provides_every_env_variable_the_connectors_reference(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    files = sorted(settings.connectors_dir.glob("*.json"))
    assert files, f"no connector JSON in {settings.connectors_dir}"
    referenced = {
        name
        for path in files
        for value in json.loads(path.read_text())["config"].values()
        for name in ENV_REFERENCE.findall(str(value))
    }
    assert referenced, "expected the connectors to take their secrets from ${env:...}"
    env = env_of(services["connect"])
    missing = sorted(name for name in referenced if not env.get(name))
    assert not missing, f"connect has no value for {missing}"
    allowlist = env.get("CONNECT_CONFIG_PROVIDERS_ENV_PARAM_ALLOWLIST_PATTERN", ".*")
    assert all(re.fullmatch(allowlist, name) for name in referenced)
    # The values themselves: the compose service names and container ports.
    assert env["CHANGELAKE_PG_HOST"] == "postgres"
    assert env["CHANGELAKE_PG_PORT"] == str(settings.postgres_port)
    assert env["CHANGELAKE_DEBEZIUM_PASSWORD"] == PASSWORDS["CHANGELAKE_DEBEZIUM_PASSWORD"]
    # LeanJsonConverter's schemas go to the worker's own Kafka, not to loopback
    assert env["CHANGELAKE_KAFKA_BOOTSTRAP"] == env["BOOTSTRAP_SERVERS"]


def test_the_connectors_service_reaches_every_service_connectors_apply_uses(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    # `connectors apply` talks to Connect, lists topics in Kafka, and checks each file's source
    # database with the values Connect fills in: all from the service's own environment (its
    # Settings, as the CLI reads them), none on loopback inside its container.
    env = env_of(services["connectors"])
    theirs = load_settings(env)
    assert (theirs.connect_host, theirs.kafka_host) == ("connect", "kafka")
    assert {"connect", "kafka", "postgres"} <= set(services["connectors"]["depends_on"])
    connect_env = env_of(services["connect"])
    for path in sorted(settings.connectors_dir.glob("*.json")):
        source = source_of(theirs, json.loads(path.read_text())["config"], env)
        assert (source.host, source.port) == ("postgres", settings.postgres_port)
        assert source.password == connect_env["CHANGELAKE_DEBEZIUM_PASSWORD"]


def test_connect_is_a_distributed_worker_with_config_providers(
    services: dict[str, dict[str, Any]],
) -> None:
    env = env_of(services["connect"])
    assert {
        name: env[name]
        for name in ("CONFIG_STORAGE_TOPIC", "OFFSET_STORAGE_TOPIC", "STATUS_STORAGE_TOPIC")
    } == {
        "CONFIG_STORAGE_TOPIC": CONNECT_CONFIG_TOPIC,
        "OFFSET_STORAGE_TOPIC": CONNECT_OFFSETS_TOPIC,
        "STATUS_STORAGE_TOPIC": CONNECT_STATUS_TOPIC,
    }
    assert set(env["CONNECT_CONFIG_PROVIDERS"].split(",")) == {"env", "file"}
    assert env["CONNECT_CONFIG_PROVIDERS_ENV_CLASS"] == (
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
    )
    assert env["CONNECT_CONFIG_PROVIDERS_FILE_CLASS"] == (
        "org.apache.kafka.common.config.provider.FileConfigProvider"
    )
    assert services["connect"]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_pipeline_reaches_services_by_name_and_keeps_state_in_a_volume(
    config: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    svc = services["pipeline"]
    env = env_of(svc)
    hosts = {
        name: env[name]
        for name in (
            "CHANGELAKE_PG_HOST",
            "CHANGELAKE_KAFKA_HOST",
            "CHANGELAKE_CONNECT_HOST",
            "CHANGELAKE_OPENSEARCH_HOST",
        )
    }
    assert hosts == {
        "CHANGELAKE_PG_HOST": "postgres",
        "CHANGELAKE_KAFKA_HOST": "kafka",
        "CHANGELAKE_CONNECT_HOST": "connect",
        "CHANGELAKE_OPENSEARCH_HOST": "opensearch",
    }
    home_volumes = [
        entry
        for entry in svc["volumes"]
        if (entry["target"] if isinstance(entry, dict) else str(entry).split(":")[1])
        == env["CHANGELAKE_HOME"]
    ]
    assert len(home_volumes) == 1
    entry = home_volumes[0]
    source = entry["source"] if isinstance(entry, dict) else str(entry).split(":")[0]
    assert source in config["volumes"], "CHANGELAKE_HOME must be a named volume"
    conditions = {name: dep["condition"] for name, dep in svc["depends_on"].items()}
    assert conditions["connectors"] == "service_completed_successfully"
    assert conditions["kafka"] == conditions["opensearch"] == "service_healthy"


def test_the_lake_is_a_host_folder_the_host_cli_reads_too(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """The pipeline writes its Delta tables into a bind mount, at the lake path its own Settings
    name; the folder on the host is the one the host CLI takes from the same .env."""
    svc = services["pipeline"]
    theirs = load_settings(env_of(svc))
    mounts = {target: source for source, target, _ in bind_mounts(svc)}
    assert theirs.lake in mounts, "the lake is not bind-mounted"
    (tmp_path / ".env").write_text((ENV_EXAMPLE).read_text())
    host_lake = dotenv_defaults(tmp_path)["CHANGELAKE_LAKE"]
    # compose resolved the default the same way, against the compose file's folder
    assert Path(host_lake).relative_to(tmp_path) == mounts[theirs.lake].relative_to(ROOT)


def test_the_pipeline_image_hands_the_lake_to_its_user_then_drops_root() -> None:
    """Docker makes a missing bind-mount folder as root: the entrypoint gives it to `changelake`
    and runs the command as that user; the build context holds the script."""
    _, stages = parse_dockerfile(ROOT / "Dockerfile")
    final = stages[-1].instructions
    assert ("USER", "changelake") not in final  # root only until the entrypoint drops it
    copies = {tuple(shlex.split(args)) for kw, args in final if kw == "COPY"}
    entry = next(json.loads(args) for kw, args in final if kw == "ENTRYPOINT")
    assert ("docker/pipeline-entrypoint.sh", entry[0]) in copies
    assert not docker_ignored("docker/pipeline-entrypoint.sh", dockerignore_patterns())
    script = (ROOT / "docker" / "pipeline-entrypoint.sh").read_text()
    assert "chown changelake:changelake" in script
    assert (
        "exec setpriv --reuid=changelake --regid=changelake --init-groups -- changelake" in script
    )


def test_every_long_running_dependency_has_a_healthcheck(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in ("postgres", "kafka", "connect", "opensearch"):
        assert services[name].get("healthcheck", {}).get("test"), name
    for name, svc in services.items():
        for dependency, spec in svc.get("depends_on", {}).items():
            if spec["condition"] == "service_healthy":
                assert services[dependency].get("healthcheck"), f"{name} waits on {dependency}"


def test_pipeline_reads_the_repository_connectors_and_schemas(
    services: dict[str, dict[str, Any]], settings: Settings
) -> None:
    """The running pipeline sees the same connector files, lake.json and search.json as the
    local stack, so editing one takes effect on restart without rebuilding the image."""
    svc = services["pipeline"]
    mounts = {Path(target): (source, ro) for source, target, ro in bind_mounts(svc)}
    for folder in (settings.connectors_dir, settings.schemas_dir):
        in_container = Path(svc["working_dir"]) / folder.name
        assert in_container in mounts, f"{folder.name}/ is not mounted into the pipeline"
        source, read_only = mounts[in_container]
        assert source.resolve() == folder.resolve() and read_only
    assert env_of(svc)["CHANGELAKE_OPENSEARCH_HOST"] == "opensearch"
    assert svc["depends_on"]["opensearch"]["condition"] == "service_healthy"
