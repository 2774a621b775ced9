"""How long after a Postgres commit a change is searchable, against a running `changelake run`.

    python -m changelake.bench.freshness --samples 30

Each sample commits an update that puts a fresh token into one product's name, then polls the
products index until a match query finds the token. Prints every sample, the median and the worst.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import psycopg

from changelake import tables
from changelake.search.client import SearchClient
from changelake.search.config import alias_for
from changelake.settings import Settings, load_settings
from changelake.stack.postgres import Postgres

POLL_S = 0.05
_UPDATE = (
    "UPDATE public.products SET name = regexp_replace(coalesce(name, ''), ' fresh[0-9a-f]+$', '')"
    " || ' ' || %s WHERE sku = %s"
)


def searchable_after(client: SearchClient, alias: str, token: str, deadline_s: float) -> float:
    started = time.monotonic()
    body = {"size": 0, "query": {"match": {"name": token}}}
    while time.monotonic() - started < deadline_s:
        found = client.request("POST", f"/{alias}/_search", body)
        if found["hits"]["total"]["value"]:
            return time.monotonic() - started
        time.sleep(POLL_S)
    raise TimeoutError(f"{token} not searchable after {deadline_s:.0f}s: is `changelake run` up?")


def measure(settings: Settings, samples: int, pause_s: float, deadline_s: float) -> list[float]:
    (ref,) = tables.captured(settings, ["products"])
    alias = alias_for(ref.topic)
    client = SearchClient.of(settings, retry_for_s=0)
    with psycopg.connect(Postgres(settings).admin_dsn(), autocommit=True) as conn:
        skus = [
            r[0]
            for r in conn.execute(
                "SELECT sku FROM public.products ORDER BY random() LIMIT %s", (samples,)
            )
        ]
        seconds = []
        for number, sku in enumerate(skus, 1):
            token = f"fresh{uuid.uuid4().hex[:12]}"
            conn.execute(_UPDATE, (token, sku))  # autocommit: returns once committed
            took = searchable_after(client, alias, token, deadline_s)
            seconds.append(took)
            print(f"sample {number:>3}: {sku} searchable {took:.2f}s after its commit", flush=True)
            time.sleep(pause_s)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--deadline", type=float, default=300.0, help="per sample")
    args = parser.parse_args()
    seconds = measure(load_settings(), args.samples, args.pause, args.deadline)
    print(
        f"commit → searchable over {len(seconds)} samples: median "
        f"{statistics.median(seconds):.2f}s, best {min(seconds):.2f}s, worst {max(seconds):.2f}s"
    )


if __name__ == "__main__":
    main()
