"""An OpenSearch with its security plugin on, for the test that the search client works through
TLS and basic auth: a distribution of its own (pom.xml's opensearch.secure.version, whose
security plugin Maven Central serves), the plugin installed and the plugin's demo configuration
applied once by `changelake setup`: demo certificates signed by a demo CA, and an `admin` user
whose generated password is kept beside them (mode 0600). Never used by the local stack, whose
OpenSearch runs with security off; the demo certificates are for loopback tests only."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from changelake.exceptions import ChangelakeError
from changelake.settings import Settings
from changelake.stack.vendor_files import is_complete, unzip

SECURE_DIST = "dist-secure"  # the Maven profile's folder (pom.xml: opensearch-secure)
ADMIN_PASSWORD_FILE = ".changelake-admin-password"


def secured_dir(settings: Settings) -> Path:
    return settings.vendor / "secure" / f"opensearch-{settings.versions.opensearch_secure}"


def admin_password(settings: Settings) -> str:
    return (secured_dir(settings) / "config" / ADMIN_PASSWORD_FILE).read_text().strip()


def prepare_secured(settings: Settings, stamp: str, progress: Callable[[str], None]) -> None:
    target = secured_dir(settings)
    if is_complete(target, stamp):
        progress(f"  os-secure   present ({target})")
        return
    version = settings.versions.opensearch_secure
    fetched = settings.vendor / SECURE_DIST
    if target.exists():
        shutil.rmtree(target)
    unzip(fetched / f"opensearch-{version}.zip", target.parent)
    java = str(settings.java_home)
    env = {**os.environ, "JAVA_HOME": java, "OPENSEARCH_JAVA_HOME": java}
    plugin = fetched / f"opensearch-security-{version}.0.zip"
    _run([str(target / "bin" / "opensearch-plugin"), "install", "--batch", plugin.as_uri()], env)
    # The demo installer wants a strong password (upper, lower, digit, symbol); it stores only
    # its hash, in config/opensearch-security/internal_users.yml.
    password = secrets.token_urlsafe(18) + "-Aa1"
    tools = target / "plugins" / "opensearch-security" / "tools"
    _run(
        ["bash", str(tools / "install_demo_configuration.sh"), "-y", "-i", "-s"],
        {**env, "OPENSEARCH_INITIAL_ADMIN_PASSWORD": password},
    )
    kept = target / "config" / ADMIN_PASSWORD_FILE
    kept.write_text(password)
    kept.chmod(0o600)
    (target / ".complete").write_text(stamp)
    progress(f"  os-secure   {version} with its security plugin (demo TLS) → {target}")


def _run(argv: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        what = " ".join(Path(a).name for a in argv[:3])
        raise ChangelakeError(f"{what} failed:\n{tail}", "run `make setup` again")
