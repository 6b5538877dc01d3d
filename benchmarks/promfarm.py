"""A simulator with dcgm-exporter and node_exporter pages per node, for a real Prometheus.

Writes ``DIR/prometheus.yml`` (scraping every page every ``--scrape-s``) and
``DIR/prom-cluster.yaml`` (the inventory read through Prometheus; its ``prometheus.url`` is a
placeholder the caller sets once its Prometheus runs), then prints ``running`` and serves
until SIGINT/SIGTERM.

Run: ``python benchmarks/promfarm.py --nodes 256 --dir /tmp/farm``
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from sparktop.sim.prometheus import prometheus_inventory_yaml, scrape_config
from sparktop.sim.runner import SimOptions, start_sim

PLACEHOLDER = "http://127.0.0.1:9"


async def serve(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    sim = await start_sim(SimOptions(nodes=args.nodes, engines=args.engines, exporters=True))
    try:
        out: Path = args.dir
        config = scrape_config(sim, args.scrape_s)
        (out / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        inventory = prometheus_inventory_yaml(sim, PLACEHOLDER, interval_s=args.scrape_s)
        (out / "prom-cluster.yaml").write_text(inventory)
        print("running", flush=True)
        await stop.wait()
    finally:
        await sim.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=256)
    parser.add_argument("--engines", type=int, default=0)
    parser.add_argument("--scrape-s", type=float, default=5.0)
    parser.add_argument("--dir", type=Path, required=True)
    asyncio.run(serve(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
