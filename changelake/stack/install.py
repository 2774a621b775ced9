"""`changelake setup`: fetch and place everything the local stack runs, once.

Debian packages (PostgreSQL, docker-compose) through apt; every JVM artifact through `mvn`
from the pinned pom.xml, one Maven profile per vendor folder. Each folder gets a `.complete`
stamp holding a hash of what mvn read, so a second run only checks, and a version bump in
pom.xml fetches afresh.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from functools import partial

from changelake import progress as bars
from changelake.exceptions import ChangelakeError
from changelake.settings import Settings
from changelake.stack.connect import DEBEZIUM_PLUGIN
from changelake.stack.opensearch import distribution_dir
from changelake.stack.secured_opensearch import SECURE_DIST, prepare_secured
from changelake.stack.service import ensure_service_user
from changelake.stack.vendor_files import is_complete, unzip

# Maven profile → vendor folder (see pom.xml).
MAVEN_FOLDERS = {
    "kafka": "kafka",
    "connect": "connect",
    "debezium": DEBEZIUM_PLUGIN,
    "spark": "spark",
    "opensearch": "dist",
    "opensearch-secure": SECURE_DIST,
}

Progress = Callable[[str], None]


SMT_FOLDER = "plugins/changelake-smt"


def pom_stamp(settings: Settings) -> str:
    """A hash of everything mvn reads, so an edit to any of it fetches or builds afresh."""
    digest = hashlib.sha256()
    sources = [settings.root / "pom.xml", settings.root / ".mvn" / "settings.xml"]
    sources += sorted(p for p in (settings.root / "connect-smt" / "src").rglob("*") if p.is_file())
    sources.append(settings.root / "connect-smt" / "pom.xml")
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def fetch_profile(settings: Settings, profile: str, stamp: str, progress: Progress) -> None:
    folder = settings.vendor / MAVEN_FOLDERS[profile]
    if is_complete(folder, stamp):
        progress(f"  {profile:<11} present ({folder})")
        return
    progress(f"  {profile:<11} fetching with mvn from pom.xml …")
    if folder.exists():
        shutil.rmtree(folder)
    _mvn(settings, profile, "dependency:copy-dependencies", f"-DoutputDirectory={folder}")
    (folder / ".complete").write_text(stamp)
    count = len(list(folder.glob("*.jar"))) + len(list(folder.glob("*.zip")))
    progress(f"  {profile:<11} {count} artifacts → {folder}")


def build_smt(settings: Settings, stamp: str, progress: Progress) -> None:
    """Build changelake's Connect transformation (connect-smt/) into its own plugin folder."""
    folder = settings.vendor / SMT_FOLDER
    if is_complete(folder, stamp):
        progress(f"  smt         present ({folder})")
        return
    progress("  smt         building connect-smt with mvn …")
    _mvn(settings, "smt", "package", "-DskipTests")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for jar in (settings.root / "connect-smt" / "target").glob("changelake-connect-smt-*.jar"):
        shutil.copy2(jar, folder)
    (folder / ".complete").write_text(stamp)
    progress(f"  smt         built → {folder}")


def _mvn(settings: Settings, profile: str, *goals: str) -> None:
    cmd = [
        "mvn", "-q", "-B",
        "-s", str(settings.root / ".mvn" / "settings.xml"),
        "-f", str(settings.root / "pom.xml"),
        "-P", profile,
        *goals,
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise ChangelakeError(
            f"mvn failed for the '{profile}' profile:\n{tail}",
            "check pom.xml and that Maven Central is reachable, then run `make setup` again",
        )


def unpack_opensearch(settings: Settings, stamp: str, progress: Progress) -> None:
    version = settings.versions.opensearch
    target = distribution_dir(settings.vendor, version)
    if is_complete(target, stamp):
        return
    if target.exists():
        shutil.rmtree(target)
    unzip(settings.vendor / "dist" / f"opensearch-{version}.zip", settings.vendor)
    (target / ".complete").write_text(stamp)
    progress(f"  opensearch  unpacked → {target}")


S3_SERVER = "s3/versitygw"
S3_MODULE = "github.com/versity/versitygw/cmd/versitygw"


def build_s3_server(settings: Settings, progress: Progress) -> None:
    """Build the S3-compatible server that s3a:// lakes are tested on, with Go from the module
    proxy. Only that test and a local object-store lake need it, so a machine without Go still
    sets up everything else, and is told what it lacks."""
    version = settings.versions.versitygw
    binary = settings.vendor / S3_SERVER
    if is_complete(binary.parent, version):
        progress(f"  s3          present ({binary})")
        return
    if shutil.which("go") is None:
        progress(f"  s3          skipped: no Go toolchain to build {S3_MODULE}@{version}")
        return
    progress(f"  s3          building {S3_MODULE}@{version} with go (a few minutes) …")
    env = {**os.environ, "GOBIN": str(binary.parent), "CGO_ENABLED": "0"}
    result = subprocess.run(
        ["go", "install", f"{S3_MODULE}@{version}"], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-15:])
        raise ChangelakeError(
            f"go install {S3_MODULE}@{version} failed:\n{tail}",
            "check that the Go module proxy is reachable, then run `make setup` again",
        )
    (binary.parent / ".complete").write_text(version)
    progress(f"  s3          built → {binary}")


def apt_install(packages: list[str], progress: Progress) -> None:
    if os.geteuid() != 0:
        raise ChangelakeError(
            f"missing Debian packages: {' '.join(packages)}",
            f"install them with: sudo apt-get install -y {' '.join(packages)}",
        )
    progress(f"  apt         installing {' '.join(packages)} …")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        check=True,
        env=env,
    )
    # Debian's package creates and may start a cluster of its own on 5432; ours replaces it.
    if shutil.which("pg_ctlcluster") and any(p.startswith("postgresql-") for p in packages):
        major = next(p.split("-")[1] for p in packages if p.startswith("postgresql-"))
        subprocess.run(["pg_ctlcluster", major, "main", "stop"], capture_output=True)


def debian_packages_missing(settings: Settings) -> list[str]:
    major = settings.versions.postgres_major
    missing = []
    if not (settings.postgres_bin / "postgres").exists():
        missing += [f"postgresql-{major}", f"postgresql-client-{major}"]
    if shutil.which("docker-compose") is None:
        missing.append("docker-compose")
    if shutil.which("mvn") is None:
        missing.append("maven")
    if not (settings.java_home / "bin" / "java").exists():
        missing.append("openjdk-17-jdk-headless")
    return missing


def setup(settings: Settings, progress: Progress = print) -> None:
    progress(f"changelake setup → {settings.home}")
    if missing := debian_packages_missing(settings):
        apt_install(missing, progress)
    else:
        progress("  apt         PostgreSQL, docker-compose, maven and Java present")
    ensure_service_user(settings)
    settings.vendor.mkdir(parents=True, exist_ok=True)
    stamp = pom_stamp(settings)
    steps: list[tuple[str, Callable[[Progress], None]]] = [
        *((p, partial(fetch_profile, settings, p, stamp)) for p in MAVEN_FOLDERS),
        ("smt", partial(build_smt, settings, stamp)),
        ("opensearch", partial(unpack_opensearch, settings, stamp)),
        ("opensearch-secure", partial(prepare_secured, settings, stamp)),
        ("s3", partial(build_s3_server, settings)),
    ]
    # Each step's own lines are written above the bar, which counts the steps done.
    with bars.bar("setup", total=len(steps), unit="step") as shown:
        for name, step in steps:
            shown.set_postfix_str(name)
            step(shown.write if not shown.disable else progress)
            shown.update()
    progress("setup complete: nothing more is downloaded at run time")
