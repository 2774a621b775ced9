"""Plain reads against `--consistent` reads of the demo shop while its load runs, against a
running `changelake run` (issue "Derived views", item 6).

    python -m changelake.bench.consistency --seconds 360 --rate 40

Starts `changelake run` and `changelake demo load`, then alternates a plain `changelake query`
(through the running pipeline when it serves the lake) and one with `--consistent`, each
counting the orders placed since the start whose total differs from the sum of their lines. The
load's transactions keep every order equal to its lines at each commit, so a read that shows a
difference saw part of a transaction. Prints every read, then per kind how many differed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from changelake.settings import load_settings
from changelake.stack.postgres import Postgres

UNBALANCED = (
    "SELECT count(*) AS orders, count(CASE WHEN o.total <> coalesce(l.s, 0) THEN 1 END) AS "
    "unbalanced FROM orders o LEFT JOIN (SELECT order_id, sum(qty * unit_price) AS s FROM "
    "order_lines GROUP BY order_id) l ON o.id = l.order_id WHERE o.id > {start}"
)
CLI = [sys.executable, "-m", "changelake.cli"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=360.0, help="how long the load runs")
    parser.add_argument("--rate", type=float, default=40.0, help="load transactions/s")
    args = parser.parse_args()
    settings = load_settings()
    with psycopg.connect(Postgres(settings).admin_dsn("shop")) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM public.orders").fetchone()
    sql = UNBALANCED.format(start=row[0] if row else 0)
    log = Path(settings.run_dir) / "consistency-run.log"
    with log.open("w") as out:
        run = subprocess.Popen([*CLI, "run"], stdout=out, stderr=subprocess.STDOUT)
    load = None
    reads: list[tuple[str, int, int, float]] = []
    try:
        deadline = time.monotonic() + 600
        while not (settings.run_dir / "served.json").exists():
            if run.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"changelake run did not start serving: see {log}")
            time.sleep(1)
        load = subprocess.Popen(
            [*CLI, "demo", "load", "--rate", str(args.rate), "--seconds", str(args.seconds)],
            stdout=subprocess.DEVNULL,
        )
        while load.poll() is None:
            kind = "consistent" if len(reads) % 2 else "plain"
            took = time.monotonic()
            flags = ["--consistent"] if kind == "consistent" else []
            done = subprocess.run([*CLI, "query", sql, "--json", *flags], capture_output=True)
            if done.returncode != 0:
                print(f"{kind} read failed: {done.stderr.decode()[-400:]}", flush=True)
                continue
            shown = json.loads(done.stdout)[0]
            reads.append((kind, shown["orders"], shown["unbalanced"], time.monotonic() - took))
            print(
                f"{kind:>10}: {shown['orders']:,} orders, {shown['unbalanced']:,} unbalanced,"
                f" {reads[-1][3]:.1f} s",
                flush=True,
            )
    finally:
        if load is not None:
            load.terminate()
            load.wait()
        run.terminate()
        run.wait()
    for kind in ("plain", "consistent"):
        mine = [r for r in reads if r[0] == kind]
        print(f"{kind}: {len(mine)} reads, {sum(1 for r in mine if r[2])} unbalanced")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
