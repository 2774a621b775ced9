"""No committed file holds a secret, and `.gitignore` keeps the local ones out of git.

Secrets reach changelake from outside the repository: the local stack generates them under
`.changelake/secrets/` (changelake/secrets.py), docker compose reads them from `.env` as
`${NAME:?...}`, connectors take them through Connect's `${env:...}` / `${file:...}` providers and
schemas/capture.sql through a psql variable. So any literal value under a password-like key in a
committed file is a leak (or a test fake that must be listed in KNOWN_FAKES, with why).

The detector is deliberately simple (regular expressions per file kind, Python through `ast`): it
flags what looks like a secret and allows only values that are visibly not one.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
# This file's self-test holds fake secrets on purpose, so it is the one file not scanned.
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Literal test values that stand in for a secret, allowed only in the file named, each with why.
KNOWN_FAKES: dict[tuple[str, str], str] = {
    ("tests/compose_files.py", "dummy-pg-password"): "only `docker-compose config` sees it",
    ("tests/compose_files.py", "dummy-debezium-password"): "as dummy-pg-password",
    ("tests/compose_files.py", "dummy-spark-connect-token"): "as dummy-pg-password",
    ("tests/unit/test_connector_files.py", "secret!"): "shows the loader refuses inline secrets",
    ("tests/integration/test_connectors.py", "hunter2"): "shows `apply` refuses inline passwords",
    ("tests/integration/test_connectors.py", "not-the-password"): "a wrong password, on purpose",
    ("tests/unit/test_source_checks.py", "s3=cret"): "a properties file's value, resolved",
    ("tests/unit/test_served.py", "t0k"): "a served.json's token, read back",
    ("tests/unit/test_compose_s3.py", "dummy-access"): "only `docker-compose config` sees it",
    ("tests/unit/test_compose_s3.py", "dummy-secret"): "as dummy-access",
    ("tests/unit/test_spark_settings.py", "aws-secret"): "shows which variable's key S3A gets",
    ("tests/unit/test_spark_settings.py", "own-access"): "as aws-secret",
    ("tests/unit/test_quick_reads.py", "fake-secret"): "shows which option delta-rs gets",
    ("tests/unit/test_quick_reads.py", "fake-access"): "as fake-secret",
    ("tests/unit/test_key_locate.py", "fake-access"): "shows which S3A keys pyarrow gets",
    ("tests/unit/test_key_locate.py", "fake-secret"): "as fake-access",
    ("tests/unit/test_key_locate.py", "fake-token"): "as fake-access",
    ("tests/unit/test_kafka_security.py", 'pa"ss\\word'): "shows a password escaped for JAAS",
    ("tests/unit/test_kafka_security.py", "pa\\"): "the same password, escaped",
    ("tests/integration/test_search_security.py", "wrong"): "a wrong password, on purpose",
    ("tests/unit/test_compose.py", "dummy-search-password"): "only `docker-compose config` sees it",
    ("tests/unit/test_compose.py", "dummy-kafka-password"): "as dummy-search-password",
}

# A key is password-like when it ends with one of these words (`database.password`,
# `CHANGELAKE_PG_PASSWORD`, `apiKey`), so `spark.kafka-token.version` or `secrets_dir` is not.
SECRET_KEY = re.compile(
    r"(?:password|passwd|secret|token|(?:api|access|secret|private)[_-]?key)$", re.IGNORECASE
)

# Anywhere in any text file.
ANYWHERE = {
    "private key block": re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
}
# scheme://user:<password>@host
URL_CREDENTIALS = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s/:@'\"]+:([^\s/@'\"]+)@", re.IGNORECASE)

# key=value (env, properties, shell, Dockerfile ENV, Makefile :=, `- KEY=value` in YAML, a libpq
# DSN inside a Python string). A bare value followed by `(` is a call, not a literal.
ASSIGN = re.compile(
    r"""(?<![\w.\-$])([A-Za-z_][\w.\-]*)\s*[:?+]?=(?!=)\s*"""
    r"""("[^"\n]*"|'[^'\n]*'|[^\s"'`;&|()]*)(\()?"""
)
# `key: value` (YAML) and `key: value` / `key value` at the start of a properties line.
YAML_PAIR = re.compile(r"""^\s*(?:-\s+)?["']?([\w.\-]+)["']?\s*:(?:\s+(.*))?$""")
PROPERTIES_PAIR = re.compile(r"^\s*([\w.\-]+)\s*[:\s]\s*(.*)$")
JSON_PAIR = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d[\w.+\-]*)')
XML_ELEMENT = re.compile(r"<([\w.\-:]+)(?:\s[^>]*)?>([^<]*)</\1>")
SQL_PASSWORD = re.compile(r"\bPASSWORD\s+'((?:[^']|'')*)'", re.IGNORECASE)

# Values that visibly are not a secret: a reference to one, a name, or a placeholder.
NOT_A_SECRET = re.compile(
    r"""^(?:
        \$\{[a-z]+:(?![-?=+])[^}]*\}               # Connect config provider: ${env:X}, ${file:P:K}
      | \$\{[A-Za-z_][\w.]*(?::?\?[^}]*|:?-)?\}    # ${VAR}, ${VAR:?msg}, ${VAR:-} (no default)
      | \$(?:[A-Za-z_]\w*|\d|\(.*\))               # shell $VAR, $1, $(command)
      | \{[\w.]*\}                                 # a Python format field: {password}
      | \*[\w.\-]+                                 # a YAML alias: *pg-password
      | :'?\w+'?                                   # a psql variable: :'debezium_password'
      | [A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+              # the name of an environment variable
      | <[^<>]+> | \.\.\. | \*+                    # <your password>, ..., *** (masked)
    )$""",
    re.VERBOSE,
)
# Placeholders allowed in files that are clearly examples (`.env.example`) and nowhere else.
EXAMPLE_PLACEHOLDER = re.compile(r"^(?:changeme|change[-_]me|replace[-_]?me)$", re.IGNORECASE)


class Finding(NamedTuple):
    path: str
    line: int
    what: str
    value: str

    def __str__(self) -> str:
        shown = f"{self.value[:2]}... ({len(self.value)} chars)" if self.value else ""
        return f"{self.path}:{self.line}: {self.what} {shown}".rstrip()


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _is_literal(path: str, value: str) -> bool:
    value = value.strip()
    if not value or NOT_A_SECRET.match(value):
        return False
    return not (path.endswith(".example") and EXAMPLE_PLACEHOLDER.match(value))


def _kind(path: str) -> str:
    name = PurePosixPath(path).name
    suffix = PurePosixPath(path).suffix
    if suffix == ".py":
        return "python"
    if suffix in (".json", ".yml", ".yaml", ".xml", ".sql", ".properties"):
        return suffix.lstrip(".").replace("yml", "yaml")
    if name == ".env" or name.startswith(".env.") or suffix == ".env":
        return "properties"
    return "text"  # shell, Dockerfile, Makefile, Markdown, TOML, Java, ...: key=value only


def _assignments(path: str, lineno: int, text: str) -> list[Finding]:
    found = []
    for match in ASSIGN.finditer(text):
        key, value, call = match.groups()
        if SECRET_KEY.search(key) and not call and _is_literal(path, _unquote(value)):
            line = lineno + text.count("\n", 0, match.start())
            found.append(Finding(path, line, f"{key}= has a literal value", _unquote(value)))
    return found


def _pair(path: str, lineno: int, key: str, value: str | None) -> list[Finding]:
    if value is None or not SECRET_KEY.search(key) or not _is_literal(path, value):
        return []
    return [Finding(path, lineno, f"{key} has a literal value", value)]


def _yaml_value(raw: str | None) -> str | None:
    """The scalar after `key:` without anchor, quotes or comment; None for a block or nothing."""
    if raw is None:
        return None
    raw = re.sub(r"^&[\w.\-]+\s*", "", raw.strip())
    if not raw:  # `key: &anchor` opening a block
        return None
    if raw[:1] in "\"'":
        return _unquote(raw.split(" #")[0]) if raw[-1:] == raw[0] else _unquote(raw)
    raw = raw.split(" #")[0].strip()
    return None if raw[:1] in ("|", ">", "{", "[") else raw


def _line_findings(path: str, kind: str, lineno: int, line: str) -> list[Finding]:
    found = [Finding(path, lineno, what, "") for what, rx in ANYWHERE.items() if rx.search(line)]
    for match in URL_CREDENTIALS.finditer(line):
        if _is_literal(path, match.group(1)):
            found.append(Finding(path, lineno, "password in a URL", match.group(1)))
    if kind == "json":
        for m in JSON_PAIR.finditer(line):
            value = m.group(2)
            found += _pair(path, lineno, m.group(1), str(json.loads(value)))
    elif kind == "xml":
        for m in XML_ELEMENT.finditer(line):
            found += _pair(path, lineno, m.group(1).rsplit(":", 1)[-1], m.group(2).strip())
    elif kind == "sql":
        found += [
            Finding(path, lineno, "PASSWORD with a literal", m.group(1))
            for m in SQL_PASSWORD.finditer(line)
            if _is_literal(path, m.group(1))
        ]
    if kind in ("yaml", "properties", "text", "sql"):
        found += _assignments(path, lineno, line)
    if kind == "yaml" and (m := YAML_PAIR.match(line)):
        found += _pair(path, lineno, m.group(1), _yaml_value(m.group(2)))
    if kind == "properties" and (m := PROPERTIES_PAIR.match(line)) and "=" not in line:
        found += _pair(path, lineno, m.group(1), _unquote(m.group(2)))
    return found


def _target_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value  # a dict key
    return None


def _named_values(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """(name, value) for assignments, annotated assignments, keywords, dict items and defaults."""
    pairs: list[tuple[str | None, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs += [(_target_name(t), node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs.append((_target_name(node.target), node.value))
        elif isinstance(node, ast.keyword) and node.arg:
            pairs.append((node.arg, node.value))
        elif isinstance(node, ast.Dict):
            pairs += [
                (_target_name(k), v) for k, v in zip(node.keys, node.values, strict=True) if k
            ]
        elif isinstance(node, ast.arguments):
            # defaults belong to the last positional arguments
            positional = (node.posonlyargs + node.args)[::-1]
            pairs += [(a.arg, d) for a, d in zip(positional, node.defaults[::-1], strict=False)]
            pairs += [
                (a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d
            ]
    return [(name, value) for name, value in pairs if name]


def _python_findings(path: str, text: str) -> list[Finding]:
    tree = ast.parse(text, filename=path)
    found = []
    for name, value in _named_values(tree):
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found += _pair(path, value.lineno, name, value.value)
    for node in ast.walk(tree):  # key=value inside strings: a libpq DSN, a properties file
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += _assignments(path, node.lineno, node.value)
    return found


def scan(path: str, text: str) -> list[Finding]:
    """Everything in one file's text that looks like a secret."""
    kind = _kind(path)
    found = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        found += _line_findings(path, kind, lineno, line)
    if kind == "python":
        try:
            found += _python_findings(path, text)
        except SyntaxError:  # not Python after all: fall back to key=value per line
            for lineno, line in enumerate(text.splitlines(), start=1):
                found += _assignments(path, lineno, line)
    return sorted(set(found))


def git(*args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    assert result.returncode in (0, 1), f"git {' '.join(args)} failed in {ROOT}: {result.stderr}"
    return result.stdout


def committed_files() -> list[str]:
    return [p for p in git("ls-files", "-z").split("\0") if p]


def read_text(path: str) -> str | None:
    """The file's text, or None for a binary file (or one deleted in the working tree)."""
    try:
        data = (ROOT / path).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def test_no_committed_file_holds_a_secret() -> None:
    found = []
    for path in committed_files():
        text = read_text(path)
        if path != SELF and text is not None:
            found += [f for f in scan(path, text) if (f.path, f.value) not in KNOWN_FAKES]
    assert not found, (
        "these look like secrets in committed files:\n"
        + "\n".join(f"  {f}" for f in found)
        + "\nmove each value out of git: ${env:NAME} or ${file:PATH:KEY} in connectors/*.json,"
        " ${NAME:?...} in docker-compose.yml with the value in .env, or the generated secrets"
        " in .changelake/secrets/ (changelake/secrets.py); rotate any real one that was committed."
        " A deliberate test fake goes into KNOWN_FAKES in tests/unit/test_no_secrets.py."
    )


def test_every_known_fake_is_still_there() -> None:
    """KNOWN_FAKES stays as short as the tree needs: a stale entry is removed, not kept."""
    seen = set()
    for path in {p for p, _ in KNOWN_FAKES}:
        text = read_text(path)
        seen |= {(f.path, f.value) for f in scan(path, text or "")}
    stale = sorted(set(KNOWN_FAKES) - seen)
    assert not stale, f"KNOWN_FAKES entries no longer found (remove them): {stale}"


def test_no_local_state_or_env_file_is_committed() -> None:
    tracked = [p for p in committed_files() if p == ".env" or p.startswith(".changelake/")]
    assert not tracked, f"committed but local only: {tracked}; `git rm --cached` them"


@pytest.mark.parametrize("path", [".env", ".changelake/", ".changelake/secrets/pg_password"])
def test_gitignore_keeps_local_secrets_out(path: str) -> None:
    # -v names the pattern's source: it must be the repository's .gitignore, not a global excludes
    # file that only this machine has; --no-index checks the pattern even for a tracked path.
    out = git("check-ignore", "-v", "--no-index", path).strip()
    match = re.match(r"(.*?):\d+:(.*)\t", out)  # <source>:<line>:<pattern>\t<path>
    assert match and match[1] == ".gitignore" and not match[2].startswith("!"), (
        f"{path} is not ignored by .gitignore (git check-ignore -v says {out!r}); add a line for it"
    )


# --- The detector itself ------------------------------------------------------------------------

FLAGGED = [
    ("id_rsa", "-----BEGIN RSA PRIVATE KEY-----"),
    ("notes.md", "key: -----BEGIN OPENSSH PRIVATE KEY-----"),
    ("README.md", "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"),
    ("connectors/x.json", '    "database.password": "hunter2",'),
    ("connectors/x.json", '    "api_key": 12345,'),
    ("docker-compose.yml", "      POSTGRES_PASSWORD: hunter2"),
    ("docker-compose.yml", "      POSTGRES_PASSWORD: 'hunter2' # for now"),
    ("docker-compose.yml", '      POSTGRES_PASSWORD: "${CHANGELAKE_PG_PASSWORD:-hunter2}"'),
    ("docker-compose.yml", "      - POSTGRES_PASSWORD=hunter2"),
    ("connect.properties", "database.password=hunter2"),
    ("connect.properties", "database.password: hunter2"),
    (".env", "CHANGELAKE_PG_PASSWORD=hunter2"),
    (".env", "CHANGELAKE_PG_PASSWORD=changeme"),
    (".env.example", "CHANGELAKE_PG_PASSWORD=hunter2"),
    ("docker/init.sh", "export PGPASSWORD=hunter2"),
    ("docker/init.sh", 'PGPASSWORD="${pg:-hunter2}" psql'),
    ("docker/init.sh", 'psql -v debezium_password="hunter2" -f capture.sql'),
    ("Dockerfile", "ENV CHANGELAKE_PG_PASSWORD=hunter2"),
    ("changelake/x.py", 'PASSWORD = "hunter2"'),
    ("changelake/x.py", 'connect(host="db", password="hunter2")'),
    ("changelake/x.py", 'settings = {"github_token": "abc123"}'),
    ("changelake/x.py", 'def connect(user: str, passwd: str = "hunter2") -> None: ...'),
    ("changelake/x.py", 'dsn = "host=db user=app password=hunter2"'),
    ("changelake/x.py", 'url = "postgresql://app:hunter2@db:5432/shop"'),
    ("schemas/x.sql", "CREATE ROLE app LOGIN PASSWORD 'hunter2';"),
    (".mvn/settings.xml", "<server><id>x</id><password>hunter2</password></server>"),
]

NOT_FLAGGED = [
    ("connectors/x.json", '    "database.password": "${env:CHANGELAKE_DEBEZIUM_PASSWORD}",'),
    ("connectors/x.json", '    "database.password": "${file:/run/secrets/pg.properties:pw}",'),
    ("docker-compose.yml", '  pg-password: &pg-password "${CHANGELAKE_PG_PASSWORD:?not set}"'),
    ("docker-compose.yml", "      POSTGRES_PASSWORD: *pg-password"),
    ("docker-compose.yml", "      POSTGRES_PASSWORD: ${CHANGELAKE_PG_PASSWORD}"),
    ("docker-compose.yml", "x-passwords:"),
    (".env.example", "CHANGELAKE_PG_PASSWORD="),
    (".env.example", "CHANGELAKE_PG_PASSWORD=changeme"),
    (".env.example", "#   python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"),
    ("docker/init.sh", 'psql -v debezium_password="$CHANGELAKE_DEBEZIUM_PASSWORD" -f x.sql'),
    ("docker/init.sh", 'PGPASSWORD="$(cat /run/secrets/pg)" psql'),
    ("changelake/x.py", 'password = ensure_secret(settings, "pg_password")'),
    ("changelake/x.py", 'ENV_NAMES = {"pg_password": "CHANGELAKE_PG_PASSWORD"}'),
    ("changelake/x.py", "def dsn(user: str, password: str) -> str: ..."),
    ("changelake/x.py", 'url = f"postgresql://{user}:{password}@{host}:5432/shop"'),
    ("changelake/x.py", 'index = f"{alias}-{secrets.token_hex(3)}"'),
    ("schemas/x.sql", "    PASSWORD :'debezium_password';"),
    ("pom.xml", "<spark.kafka-token.version>4.0.0</spark.kafka-token.version>"),
    ("README.md", "`$CHANGELAKE_PG_PASSWORD` overrides the generated password"),
]


@pytest.mark.parametrize(("path", "line"), FLAGGED)
def test_the_detector_flags(path: str, line: str) -> None:
    assert scan(path, line), f"{path}: {line!r} was not flagged"


@pytest.mark.parametrize(("path", "line"), NOT_FLAGGED)
def test_the_detector_allows(path: str, line: str) -> None:
    assert scan(path, line) == []


def test_a_finding_names_file_and_line_but_not_the_whole_secret() -> None:
    (finding,) = scan("changelake/x.py", 'x = 1\n\nPASSWORD = "hunter2"\n')
    assert str(finding) == "changelake/x.py:3: PASSWORD has a literal value hu... (7 chars)"
