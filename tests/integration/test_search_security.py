"""The index on an OpenSearch with its security plugin on: the snapshot and the changes reach it
through TLS (the server's certificate verified against its CA) and basic auth, and the index
equals the source; a wrong password or an untrusted certificate fails at once, naming what to
set. On the real Postgres, Connect, Kafka, Spark and a secured OpenSearch node."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable

import pytest

from changelake.search.client import SearchClient
from changelake.settings import Settings
from tests.integration.pipeline_fixtures import Pipeline
from tests.search_compare import differences, doc_id
from tests.secured_node import USER, secured_opensearch

pytestmark = pytest.mark.stack

FIELDS = {"name": "text", "price": "numeric"}


def test_the_index_is_kept_through_tls_and_basic_auth(
    pipeline: Callable[..., Pipeline], settings: Settings, unique: str
) -> None:
    t = f"secured_{unique}"
    p = pipeline(
        [t],
        [
            f"CREATE TABLE public.{t} (id int PRIMARY KEY, name text, price numeric(10,2))",
            f"INSERT INTO public.{t} SELECT i, 'lamp ' || i, i * 1.5 FROM generate_series(1, 30) i",
        ],
        search={t: FIELDS},
    )
    # The service user must reach its folder: under the state directory, not pytest's 0700 tmp.
    folder = settings.home / "tests" / f"secured-{unique}"
    try:
        with secured_opensearch(settings, folder) as node:
            env = node.env()
            p.run_once(env_extra=env)
            p.sql(f"UPDATE public.{t} SET name = 'handmade lamp' WHERE id <= 3")
            p.sql(f"DELETE FROM public.{t} WHERE id > 25")
            p.run_once(env_extra=env)
            client = SearchClient(
                f"https://127.0.0.1:{node.port}", 0, user=USER, password=node.password,
                ca_file=str(node.ca_file),
            )  # fmt: skip
            assert differences(client, p.alias(t), p.dsn, f"public.{t}", ["id"], list(FIELDS)) == []
            found = p.cli("search", "handmade", "--tables", t, "--json", env_extra=env)
            hits = json.loads(found.stdout)["hits"]
            assert {h["id"] for h in hits} == {doc_id((i,)) for i in (1, 2, 3)}

            wrong = p.cli(
                "search", "lamp", env_extra={**env, "CHANGELAKE_OPENSEARCH_PASSWORD": "wrong"},
                check=False,
            )  # fmt: skip
            assert wrong.returncode == 1
            assert "401" in wrong.stderr and "CHANGELAKE_OPENSEARCH_PASSWORD" in wrong.stderr
            untrusted = {k: v for k, v in env.items() if k != "CHANGELAKE_OPENSEARCH_CA"}
            refused = p.cli("search", "lamp", env_extra=untrusted, check=False)
            assert refused.returncode == 1 and "CHANGELAKE_OPENSEARCH_CA" in refused.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)
