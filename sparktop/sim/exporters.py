"""A simulated node's dcgm-exporter and node_exporter pages, for a real Prometheus to scrape.

Names, types, HELP texts and label sets follow the real output in
``../shared/fixtures/dcgm`` (dcgm-exporter's ``etc/default-counters.csv`` and pasted pages):
every GPU series carries ``gpu``, ``UUID``, ``device``, ``modelName`` and ``Hostname``; counter
families keep their bare names (dcgm-exporter adds no ``_total``). Besides the defaults the page
has the fields a counters file can switch on and sparktop reads: ``DCGM_FI_DEV_MAX_SM_CLOCK``,
the clock-event reasons (``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``, or the older
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` for a node with an old driver) and the violation
counters (ns). GB10 has no framebuffer of its own, so no ``DCGM_FI_DEV_FB_*`` lines.

The node_exporter page has ``node_memory_{MemTotal,MemAvailable,MemFree}_bytes`` from the
same ``/proc/meminfo`` figures the SSH probe reads.

Each node gets its own loopback address (``127.77.x.y``) so that, as on a real cluster, the
host part of Prometheus's ``instance`` label names the node, whichever exporter port it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from sparktop.sim.gpu import MAX_SM_CLOCK_MHZ, GpuModel

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

GAUGES = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum supported SM clock for the device (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
)
"""Gauge fields and their HELP texts (default-counters.csv; MAX_SM_CLOCK from dcgm_fields.h)."""

VIOLATIONS = (
    ("DCGM_FI_DEV_POWER_VIOLATION", "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "Throttling duration due to thermal constraints (in ns)."),
)


def node_address(index: int) -> str:
    """The loopback address of simulated node ``index`` (0-based): 127.77.0.1, 127.77.0.2, …"""
    return f"127.77.{index // 250}.{index % 250 + 1}"


class DcgmCollector(Collector):
    """dcgm-exporter's families for one simulated GB10 GPU."""

    def __init__(self, gpu: GpuModel, old_driver: bool = False) -> None:
        self.gpu = gpu
        self.old_driver = old_driver

    def _labels(self) -> dict[str, str]:
        g = self.gpu
        return {
            "gpu": str(g.index),
            "UUID": g.uuid,
            "device": f"nvidia{g.index}",
            "modelName": g.name,
            "Hostname": g.node,
        }

    def collect(self) -> Iterator[Metric]:
        g = self.gpu
        labels = self._labels()
        values = {
            "DCGM_FI_DEV_SM_CLOCK": round(g.clock_mhz),
            "DCGM_FI_DEV_MAX_SM_CLOCK": MAX_SM_CLOCK_MHZ,
            "DCGM_FI_DEV_GPU_TEMP": round(g.temp_c),
            "DCGM_FI_DEV_POWER_USAGE": round(g.power_w, 3),
            "DCGM_FI_DEV_GPU_UTIL": round(g.util_pct),
        }
        for name, doc in GAUGES:
            yield _one(name, doc, "gauge", labels, values[name])
        reasons = (
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
            if self.old_driver
            else "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
        )
        yield _one(reasons, "Current clock event reasons (bitmask).", "gauge", labels, g.mask)
        us = g.counters_us
        violation_ns = {
            "DCGM_FI_DEV_POWER_VIOLATION": (us["sw_power_cap"] + us["hw_power_brake_slowdown"]),
            "DCGM_FI_DEV_THERMAL_VIOLATION": (
                us["sw_thermal_slowdown"] + us["hw_thermal_slowdown"]
            ),
        }
        for name, doc in VIOLATIONS:
            yield _one(name, doc, "counter", labels, round(violation_ns[name] * 1000))


class NodeExporterCollector(Collector):
    """node_exporter's memory families for one simulated node (bytes, from /proc/meminfo)."""

    def __init__(self, gpu: GpuModel) -> None:
        self.gpu = gpu

    def collect(self) -> Iterator[Metric]:
        fields: dict[str, float] = {}
        for line in self.gpu.meminfo().splitlines():
            key, _, rest = line.partition(":")
            with contextlib.suppress(ValueError, IndexError):
                fields[key] = float(rest.split()[0]) * 1024
        for key in ("MemAvailable", "MemFree", "MemTotal"):
            if key in fields:
                name = f"node_memory_{key}_bytes"
                yield _one(name, f"Memory information field {key}_bytes.", "gauge", {}, fields[key])


def _one(name: str, doc: str, kind: str, labels: dict[str, str], value: float) -> Metric:
    metric = Metric(name, doc, kind)
    metric.add_sample(name, labels, float(value))
    return metric


def _label_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def dcgm_text(collector: Collector) -> bytes:
    """The page as dcgm-exporter writes it: ``# HELP``/``# TYPE`` with the bare field name
    even for counters (prometheus_client's writer would name the family ``…_total``),
    labels in the exporter's order, integer fields without a fraction, float fields as
    ``%f`` (``300.000000`` in the V100 fixture)."""
    lines: list[str] = []
    for metric in collector.collect():
        lines.append(f"# HELP {metric.name} {metric.documentation}")
        lines.append(f"# TYPE {metric.name} {metric.type}")
        for sample in metric.samples:
            labels = ",".join(f'{k}="{_label_text(v)}"' for k, v in sample.labels.items())
            value = sample.value
            text = f"{value:.0f}" if float(value).is_integer() else f"{value:f}"
            lines.append(f"{sample.name}{{{labels}}} {text}")
    return ("\n".join(lines) + "\n").encode()


def _client_text(collector: Collector) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


class ExporterServer:
    """One ``GET /metrics`` page on ``host``; ``go_away``/``come_back`` keep the port.
    ``render`` writes the page (default: prometheus_client's text format)."""

    def __init__(
        self,
        collector: Collector,
        refresh: Callable[[], object],
        host: str,
        render: Callable[[Collector], bytes] | None = None,
    ) -> None:
        self.collector = collector
        self.render = render or _client_text
        self.refresh = refresh
        self.host = host
        self.port = 0
        self.app = web.Application()
        self.app.add_routes([web.get("/metrics", self._metrics)])
        self._runner: web.AppRunner | None = None

    @property
    def target(self) -> str:
        """``host:port`` as Prometheus's ``instance`` label will read."""
        return f"{self.host}:{self.port}"

    async def _metrics(self, request: web.Request) -> web.Response:
        self.refresh()
        return web.Response(
            body=self.render(self.collector), headers={"Content-Type": CONTENT_TYPE}
        )

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def go_away(self) -> None:
        """Stop answering (connection refused), as a node that is down."""
        await self.close()

    async def come_back(self) -> None:
        if self._runner is None:
            await self.start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
