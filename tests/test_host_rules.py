"""Host rules: the rank low on power against its TP peers (calibrated on the published
numbers), unified-memory pressure, and the RoCE fabric, each with hysteresis."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.model import EventKind, Severity
from sparktop.alerts.thresholds import Thresholds
from sparktop.hostmodel import FabricPort, FabricReading, PowerTelemetry
from sparktop.model import NodeMemory, NodeSample
from tests.alert_samples import cluster, engine, gpu

GROUP = ("spark-1", "spark-2", "spark-3", "spark-4")


def ranks(powers: tuple[float, ...], t: float = 0.0, **gpu_overrides: object) -> list[NodeSample]:
    """Four loaded GB10s at 2,515 MHz and 97 % with these powers (W)."""
    return [
        NodeSample(node=n, time_s=t, gpus=(gpu(power_w=p, **gpu_overrides),))
        for n, p in zip(GROUP, powers, strict=True)
    ]


def findings(*samples: object, tp: bool = True) -> dict[str, object]:
    alerts = AlertEngine(Thresholds(), tp_groups={"dsv41": GROUP} if tp else {})
    return {f.key: f for f in alerts.findings(cluster(*samples))}  # type: ignore[arg-type]


# -- low power vs peers --------------------------------------------------------------------


def test_tried_case_steady_clock_17_w_vs_40_w_peers_is_flagged_and_named_straggler() -> None:
    nodes = ranks((40.2, 39.8, 17.0, 40.6))
    slow = replace(nodes[2], gpus=(gpu(power_w=17.0, sm_clock_mhz=2400.0, utilization_pct=100.0),))
    found = findings(*nodes[:2], slow, nodes[3], engine(running=6.0))
    fact = found["gpu.low_power_vs_peers:spark-3/gpu0"]
    assert fact.severity is Severity.WARNING  # type: ignore[attr-defined]
    message = fact.message  # type: ignore[attr-defined]
    assert "low power vs peers in dsv41's TP group: 17.0 W vs peers' median 40.2 W" in message
    assert "(spark-1 40.2, spark-2 39.8, spark-4 40.6)" in message  # peers by name
    assert "at 2,400 MHz (peers 2,515), 100 % busy" in message
    assert "no clock-event reason reported" in message
    straggler = found["tp.straggler:dsv41@spark-3"]
    assert "low power vs peers (17.0 vs 40.2 W, clock 2,400 vs 2,515 MHz)" in (
        straggler.message  # type: ignore[attr-defined]
    )
    assert not any(k.startswith(("gpu.throttle", "gpu.hidden")) for k in found)


@pytest.mark.parametrize(
    ("slow_w", "peers_w"), [(15.0, 36.0), (20.0, 31.0), (17.5, 33.5)], ids=["15v36", "20v31", "mid"]
)
def test_published_range_15_20_w_vs_31_36_w_is_flagged(slow_w: float, peers_w: float) -> None:
    nodes = ranks((peers_w, peers_w + 0.4, slow_w, peers_w - 0.3))
    assert "gpu.low_power_vs_peers:spark-3/gpu0" in findings(*nodes, engine(running=4.0))


def test_evenly_loaded_idle_and_ungrouped_clusters_are_not_flagged() -> None:
    even = ranks((41.4, 42.1, 40.8, 41.9))
    assert not [k for k in findings(*even, engine()) if "peers" in k or "straggler" in k]
    idle = ranks((11.2, 11.0, 10.7, 11.5), utilization_pct=2.0)
    assert not [k for k in findings(*idle, engine(running=0.0)) if "peers" in k]
    idle_one = ranks((40.0, 40.0, 11.2, 40.0))  # one rank idle, its peers busy
    idle_one[2] = replace(idle_one[2], gpus=(gpu(power_w=11.2, utilization_pct=3.0),))
    assert not [k for k in findings(*idle_one, engine()) if "peers" in k]
    engine_idle = ranks((40.0, 40.0, 17.0, 40.0))
    assert not [k for k in findings(*engine_idle, engine(running=0.0)) if "peers" in k]
    assert not [k for k in findings(*ranks((40.0, 40.0, 17.0, 40.0)), tp=False) if "peers" in k]


def test_hidden_low_power_is_not_raised_twice() -> None:
    nodes = ranks((40.0, 40.0, 14.9, 40.0))
    nodes[2] = replace(
        nodes[2], gpus=(gpu(power_w=14.9, sm_clock_mhz=513.0, utilization_pct=100.0),)
    )
    found = findings(*nodes, engine())
    assert "gpu.hidden_low_power:spark-3/gpu0" in found
    assert "gpu.low_power_vs_peers:spark-3/gpu0" not in found


def test_spark_hwmon_limit_explains_the_slow_state() -> None:
    def telemetry(pl1_w: float, cap_w: float) -> PowerTelemetry:
        return PowerTelemetry(
            driver="spbm",
            power_w=MappingProxyType({"pl1": pl1_w, "gpu": 17.0}),
            cap_w=MappingProxyType({"pl1": cap_w, "syspl1": 240.0}),
            pl_level=1.0 if cap_w < 100 else 0.0,
            prochot=0.0,
        )

    nodes = ranks((40.0, 40.0, 17.0, 40.0))
    nodes = [replace(n, power=telemetry(58.0, 140.0)) for n in nodes]
    nodes[2] = replace(nodes[2], power=telemetry(29.4, 30.0))
    found = findings(*nodes, engine())
    message = found["gpu.low_power_vs_peers:spark-3/gpu0"].message  # type: ignore[attr-defined]
    assert message.endswith("spark_hwmon: pl1 29.4 W at its 30 W cap, pl_level 1")
    assert "spark_hwmon: pl1 29.4 W" in found["tp.straggler:dsv41@spark-3"].message  # type: ignore[attr-defined]
    capped = [replace(n, power=telemetry(20.0, 140.0)) for n in ranks((40.0, 40.0, 17.0, 40.0))]
    capped[2] = replace(capped[2], power=telemetry(20.0, 60.0))
    text = findings(*capped, engine())["gpu.low_power_vs_peers:spark-3/gpu0"].message  # type: ignore[attr-defined]
    assert "pl1 cap 60 W vs peers' 140 W" in text


def test_low_power_alert_fires_after_hold_and_clears_after_hold() -> None:
    alerts = AlertEngine(Thresholds(hold_s=10.0), tp_groups={"dsv41": GROUP})
    fired = cleared = None
    for t in range(0, 40):
        powers = (40.0, 40.0, 17.0 if t < 20 else 40.0, 40.0)
        for event in alerts.update(cluster(*ranks(powers, float(t)), engine(t=float(t))), t):
            if event.alert.rule == "gpu.low_power_vs_peers":
                if event.kind is EventKind.FIRED:
                    fired = t
                elif event.kind is EventKind.CLEARED:
                    cleared = t
    assert fired == 10 and cleared == 30


# -- memory pressure ---------------------------------------------------------------------------


def _memory(available_gib: float, swap_gib: float = 0.0, some: float = 0.0, full: float = 0.0):
    return NodeMemory(
        total_mib=124_610.1,
        used_mib=124_610.1 - available_gib * 1024,
        unified=True,
        available_mib=available_gib * 1024,
        swap_total_mib=16_384.0,
        swap_used_mib=swap_gib * 1024,
        psi_some_pct=some,
        psi_full_pct=full,
    )


def test_memory_pressure_warning_then_critical_from_gb10_defaults() -> None:
    def one(memory: NodeMemory) -> dict[str, object]:
        return findings(replace(ranks((40.0,) * 4)[0], memory=memory), tp=False)

    assert "node.memory_pressure:spark-1" not in one(_memory(17.0))  # vLLM at 0.83 leaves ~17 GiB
    warn = one(_memory(6.0, swap_gib=3.0, some=12.0))["node.memory_pressure:spark-1"]
    assert warn.severity is Severity.WARNING  # type: ignore[attr-defined]
    assert warn.message == (  # type: ignore[attr-defined]
        "memory pressure on 121.7 GiB of unified memory (the GPU's too): MemAvailable 6.0 GiB "
        "(< 8 GiB), swap 3.0 GiB in use, PSI some 12 % (avg10)"
    )
    crit = one(_memory(1.5, some=40.0, full=12.0))["node.memory_pressure:spark-1"]
    assert crit.severity is Severity.CRITICAL  # type: ignore[attr-defined]
    assert "MemAvailable 1.5 GiB (< 2 GiB)" in crit.message and "PSI full 12 %" in crit.message  # type: ignore[attr-defined]
    psi_only = one(_memory(20.0, full=6.0))["node.memory_pressure:spark-1"]
    assert psi_only.severity is Severity.CRITICAL  # type: ignore[attr-defined]


def test_memory_pressure_thresholds_come_from_the_inventory() -> None:
    from sparktop.inventory.models import AlertThresholds

    t = Thresholds.from_config(AlertThresholds(mem_available_warn_gib=20.0))
    assert t.mem_available_warn_gib == 20.0 and t.mem_available_critical_gib == 2.0
    alerts = AlertEngine(t)
    state = cluster(replace(ranks((40.0,) * 4)[0], memory=_memory(17.0)))
    assert [f.rule for f in alerts.findings(state)] == ["node.memory_pressure"]


# -- fabric ------------------------------------------------------------------------------------


def _port(device: str, up: bool = True, **kw: object) -> FabricPort:
    return FabricPort(
        device,
        1,
        state="4: ACTIVE" if up else "1: DOWN",
        phys_state="5: LinkUp" if up else "3: Disabled",
        netdev=f"enp1s0f{device[-1]}np{device[-1]}",
        **kw,  # type: ignore[arg-type]
    )


def _fabric(*ports: FabricPort) -> FabricReading:
    return FabricReading(ports=ports, missing="", uptime_s=1.0)


def _traffic(gbps: float) -> FabricReading:
    return _fabric(_port("rocep1s0f0", tx_gbps=gbps / 2, rx_gbps=gbps / 2))


def test_link_down_only_for_a_port_seen_up_and_critical_in_a_tp_group() -> None:
    alerts = AlertEngine(Thresholds(hold_s=0.0), tp_groups={"dsv41": GROUP})
    nodes = ranks((40.0,) * 4)
    unused = _port("rocep1s0f1", up=False)
    up = [replace(n, fabric=_fabric(_port("rocep1s0f0"), unused)) for n in nodes]
    assert not [f for f in alerts.findings(cluster(*up)) if f.rule.startswith("fabric")]
    down = list(up)
    down[1] = replace(nodes[1], fabric=_fabric(_port("rocep1s0f0", up=False), unused))
    (finding,) = [f for f in alerts.findings(cluster(*down)) if f.rule == "fabric.link_down"]
    assert finding.subject == "spark-2/rocep1s0f0/1" and finding.severity is Severity.CRITICAL
    assert finding.message == "RoCE link down: 1: DOWN, 3: Disabled (enp1s0f0np0)"
    never = AlertEngine(Thresholds(), tp_groups={"dsv41": GROUP})
    assert not [f for f in never.findings(cluster(*down)) if f.rule == "fabric.link_down"]


def test_growing_error_counters_and_a_flap() -> None:
    port = _port(
        "rocep1s0f0",
        errors={"symbol_error": 120.0, "link_downed": 3.0},
        errors_grown={"symbol_error": 37.0, "link_downed": 1.0},
    )
    sample = replace(ranks((40.0,) * 4)[0], fabric=_fabric(port))
    found = findings(sample, tp=False)
    errors = found["fabric.errors:spark-1/rocep1s0f0/1"]
    assert errors.message == (  # type: ignore[attr-defined]
        "RoCE error counters growing (enp1s0f0np0): symbol_error +37 since the last reading"
    )
    flap = found["fabric.link_down:spark-1/rocep1s0f0/1"]
    assert "went down and came back (link_downed +1)" in flap.message  # type: ignore[attr-defined]
    assert flap.severity is Severity.WARNING  # type: ignore[attr-defined]


def test_traffic_asymmetry_inside_a_busy_tp_group() -> None:
    nodes = ranks((40.0,) * 4)
    flows = (12.1, 11.8, 0.6, 12.4)
    busy = [replace(n, fabric=_traffic(g)) for n, g in zip(nodes, flows, strict=True)]
    found = findings(*busy, engine())
    finding = found["fabric.asymmetry:spark-3"]
    assert finding.message == (  # type: ignore[attr-defined]
        "low fabric traffic vs peers in dsv41's TP group: 0.6 Gb/s vs peers' median 12.1 Gb/s "
        "(spark-1 12.1, spark-2 11.8, spark-4 12.4)"
    )
    assert "low fabric traffic vs peers" in found["tp.straggler:dsv41@spark-3"].message  # type: ignore[attr-defined]
    even = [replace(n, fabric=_traffic(12.0)) for n in nodes]
    assert "fabric.asymmetry:spark-3" not in findings(*even, engine())
    idle = [replace(n, fabric=_traffic(g)) for n, g in zip(nodes, flows, strict=True)]
    assert "fabric.asymmetry:spark-3" not in findings(*idle, engine(running=0.0))
