"""The Nodes table and the alert rules view each GPU once a tick: the table reads the GPU
views and peer facts the rules built for the same state, and marks rows as a table that
judged the state itself would."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sparktop.alerts import gpu_rules, gpu_state
from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import NodeSample
from sparktop.ui.app import SparktopApp
from sparktop.ui.views import ViewConfig, node_rows, row_key
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.fakes import T0, Clock, Scripted, gpu, node, plan

GROUP = ("spark-1", "spark-2", "spark-3")


SLOW = gpu(uuid="GPU-spark-3", power_w=17.0, sm_clock_mhz=2400.0, utilization_pct=100.0)


def _samples() -> list[NodeSample]:
    """A busy TP group: spark-3 far below its peers' power (a peer fact), spark-2 with a
    thermal slowdown bit (throttled), spark-1 healthy."""
    return [
        node("spark-1", gpus=(gpu(uuid="GPU-spark-1", power_w=40.5),)),
        node("spark-2", gpus=(gpu(uuid="GPU-spark-2", power_w=40.1, clock_event_mask=0x20),)),
        node("spark-3", gpus=(SLOW,)),
    ]


def _counting_views(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every GPU view built from here on (the rules' and any the table builds), by node."""
    built: list[str] = []

    class Counted(gpu_rules.GpuView):
        __slots__ = ()

        def __init__(self, node: str, *args: object) -> None:
            built.append(node)
            super().__init__(node, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(gpu_rules, "GpuView", Counted)
    monkeypatch.setattr(gpu_state, "GpuView", Counted)
    return built


async def test_a_tick_views_each_gpu_once_for_the_table_and_the_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    the_plan = plan(cluster="test", tp_groups={"dsv41": list(GROUP)})
    app = SparktopApp(
        the_plan,
        [Scripted(s) for s in _samples()],
        the_plan.alert_engine(),
        clock=Clock(),
        autostart=False,
    )
    async with app.run_test(size=(160, 50)):
        await app.poller.poll_once()
        built = _counting_views(monkeypatch)
        app.tick()
        assert sorted(built) == list(GROUP)  # was three per GPU: the rules, then the table twice
        table = app.query_one(NodeTable)
        states = {n: table.cell_text(row_key(n, f"GPU-{n}"), "state") for n in GROUP}
        assert states == {"spark-1": "ok", "spark-2": "throttled", "spark-3": "pwr<peers"}


def test_rows_from_the_rules_context_are_the_rows_the_table_judges_itself() -> None:
    state = ClusterState()
    for sample in _samples():
        state.apply(sample)
    config = ViewConfig(engine_nodes={"dsv41": GROUP})
    engine = AlertEngine(config.thresholds, tp_groups=config.engine_nodes)
    engine.update(state, T0)
    shared = engine.last_context
    assert shared is not None and shared.gpu_views is not None
    views = list(shared.gpu_views)
    rows = node_rows(state, {}, T0, config, ctx=shared)
    assert shared.gpu_views == views  # read, not rebuilt
    assert rows == node_rows(state, {}, T0, config)
    assert rows[2].cells["state"] == ("pwr<peers", "warn")


def test_a_context_judging_by_other_thresholds_is_not_the_tables() -> None:
    state = ClusterState()
    for sample in _samples():
        state.apply(replace(sample, time_s=T0))
    config = ViewConfig(engine_nodes={"dsv41": GROUP})
    lax = AlertEngine(Thresholds(peer_power_ratio=0.1), tp_groups=config.engine_nodes)
    lax.update(state, T0)  # under its thresholds spark-3's power is no fact
    rows = node_rows(state, {}, T0, config, ctx=lax.last_context)
    assert rows[2].cells["state"] == ("pwr<peers", "warn")
