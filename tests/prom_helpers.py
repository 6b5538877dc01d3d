"""A simulated cluster scraped by a real Prometheus (Debian's ``prometheus``) on loopback.

``prom_cluster(tmp_path, **sim_options)`` starts the simulator with its dcgm-exporter and
node_exporter pages, a Prometheus scraping them every ``scrape_s`` (1 s) with a TSDB under
``tmp_path``, waits until every target has been scraped, and yields ``(sim, prometheus)``.
Tests that use it are marked ``prometheus``; without the binary they skip (outside CI) or
fail (under CI, which installs it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from sparktop.inventory import Inventory, parse_inventory
from sparktop.sim.prometheus import prometheus_inventory_yaml, scrape_config, scrape_targets
from sparktop.sim.promrun import NODE_EXPORTER, PROMETHEUS, Prometheus, binary, start_prometheus
from sparktop.sim.runner import SimHandle, SimOptions, start_sim

SCRAPE_S = 1.0


def require(name: str = PROMETHEUS) -> str:
    """The binary's path; skip when absent outside CI, fail under CI (it must be installed)."""
    path = binary(name)
    if path is not None:
        return path
    message = f"{name} not installed (Debian: apt-get install prometheus prometheus-node-exporter)"
    if os.environ.get("CI"):
        pytest.fail(message + "; CI must install it (.ci/run)")
    pytest.skip(message)


@asynccontextmanager
async def prom_cluster(
    tmp_path: Path,
    *,
    extra_jobs: dict[str, list[str]] | None = None,
    scrape_s: float = SCRAPE_S,
    **options: object,
) -> AsyncIterator[tuple[SimHandle, Prometheus]]:
    require(PROMETHEUS)
    sim = await start_sim(SimOptions(exporters=True, **options))  # type: ignore[arg-type]
    prom: Prometheus | None = None
    try:
        config = scrape_config(sim, scrape_s)
        for job, targets in (extra_jobs or {}).items():
            config["scrape_configs"].append(
                {"job_name": job, "static_configs": [{"targets": targets}]}
            )
        prom = await start_prometheus(config, tmp_path / "prometheus")
        count = sum(len(t) for t in scrape_targets(sim).values()) + sum(
            len(t) for t in (extra_jobs or {}).values()
        )
        await prom.until_series("up == 1", count)
        # Two scrapes of every engine, so rate() has a window to work with.
        window = f"{round(10 * scrape_s)}s"
        await prom.until_series(f'count_over_time(up{{job="vllm"}}[{window}]) >= 3', len(sim.http))
        yield sim, prom
    finally:
        if prom is not None:
            prom.close()
        await sim.close()


def prom_inventory(sim: SimHandle, prom: Prometheus, tmp_path: Path) -> tuple[Inventory, Path]:
    """The simulator's inventory read through ``prom`` (written to ``tmp_path``)."""
    path = tmp_path / "prom-cluster.yaml"
    path.write_text(prometheus_inventory_yaml(sim, prom.url))
    return parse_inventory(path.read_text(), str(path)), path


__all__ = ["NODE_EXPORTER", "PROMETHEUS", "prom_cluster", "prom_inventory", "require"]
