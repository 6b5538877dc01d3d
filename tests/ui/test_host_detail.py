"""The node details' host sections and the row marks they share with the alert rules:
memory pressure, the rank against its TP peers, processes, the RoCE fabric, spark_hwmon."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from textual.widgets import Label, Static

from sparktop.hostmodel import FabricPort, FabricReading, GpuProcess, PowerTelemetry
from sparktop.model import NA, NodeMemory
from sparktop.sources.host.files import NO_INFINIBAND, NO_PSI
from sparktop.ui.app import SparktopApp
from sparktop.ui.host_view import fabric_text, power_text, pressure_text, processes_text
from sparktop.ui.screens.node_detail import NodeDetailScreen
from sparktop.ui.views import row_key
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.fakes import Clock, Scripted, gpu, node, plan

PORT = FabricPort(
    "rocep1s0f0",
    1,
    state="4: ACTIVE",
    phys_state="5: LinkUp",
    rate="200 Gb/sec (4X HDR)",
    rate_gbps=200.0,
    netdev="enp1s0f0np0",
    tx_gbps=5.99,
    rx_gbps=6.01,
    errors=MappingProxyType({"symbol_error": 42.0, "link_downed": 0.0}),
    errors_grown=MappingProxyType({"symbol_error": 5.0}),
    temperature_c=62.0,
)
SPBM = PowerTelemetry(
    driver="spbm",
    power_w=MappingProxyType({"gpu": 16.5, "pl1": 29.4}),
    cap_w=MappingProxyType({"pl1": 30.0}),
    energy_j=MappingProxyType({"gpu": 559.0}),
    prochot=0.0,
    pl_level=1.0,
)


def test_host_texts_show_figures_and_say_why_a_value_is_missing() -> None:
    mem = NodeMemory(
        total_mib=124_610.0,
        available_mib=1434.0,
        swap_total_mib=16_384.0,
        swap_used_mib=5_837.0,
        psi_some_pct=36.6,
        psi_full_pct=12.8,
    )
    assert pressure_text(mem) == (
        "MemAvailable 1.4 GiB · swap 5.7 GiB of 16.0 GiB used · PSI some 36.6 % / full 12.8 % "
        "(avg10)"
    )
    bare = NodeMemory(psi_some_pct=NA(NO_PSI), psi_full_pct=NA(NO_PSI))
    assert f"PSI n/a ({NO_PSI})" in pressure_text(bare)
    fabric = FabricReading(ports=(PORT,), missing="", uptime_s=1.0)
    assert fabric_text(fabric).splitlines() == [
        "node tx 5.99 / rx 6.01 Gb/s",
        "rocep1s0f0/1 enp1s0f0np0  4: ACTIVE · 5: LinkUp · 200 Gb/sec (4X HDR)  "
        "tx 5.99 / rx 6.01 Gb/s  errors: symbol_error 42 (+5) · NIC 62 °C",
    ]
    assert fabric_text(FabricReading(missing=NO_INFINIBAND)) == f"n/a ({NO_INFINIBAND})"
    assert power_text(SPBM).splitlines() == [
        "spbm: gpu 16.5 W, pl1 29.4 / 30 W cap",
        "energy: gpu 559 J",
        "prochot 0 · pl_level 1",
    ]
    assert power_text(PowerTelemetry()) == ""
    evil = GpuProcess(pid=7, name="x\x1b[2Jy", used_mib=10.0, share_pct=0.01)
    assert "x␛[2Jy" in processes_text((evil,))
    assert processes_text(()) == "none"


async def test_detail_screen_and_row_for_a_slow_rank_under_pressure() -> None:
    names = ("spark-1", "spark-2", "spark-3")
    slow = gpu(uuid="GPU-spark-3", power_w=17.0, sm_clock_mhz=2400.0, utilization_pct=100.0)
    pressed = replace(
        node("spark-3").memory,
        available_mib=1_400.0,
        swap_total_mib=16_384.0,
        swap_used_mib=5_800.0,
        psi_some_pct=36.0,
        psi_full_pct=12.0,
    )
    sources = [Scripted(node(n, gpus=(gpu(uuid=f"GPU-{n}", power_w=40.5),))) for n in names[:2]]
    sources.append(
        Scripted(
            node(
                "spark-3",
                gpus=(slow,),
                memory=pressed,
                fabric=FabricReading(ports=(PORT,), missing="", uptime_s=1.0),
                power=SPBM,
                processes=(GpuProcess(41_000, "python3", "GPU-spark-3", 103_426.0, 83.0),),
            )
        )
    )
    app = SparktopApp(
        plan(cluster="test", tp_groups={"dsv41": list(names)}),
        sources,
        clock=Clock(),
        autostart=False,
    )
    async with app.run_test(size=(140, 60)) as pilot:
        await app.poll_now()
        table = app.query_one(NodeTable)
        assert table.cell_text(row_key("spark-3", "GPU-spark-3"), "state") == "pwr<peers"
        app.show_node_details("spark-3", "GPU-spark-3")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeDetailScreen)

        def text(widget_id: str) -> str:
            return str(screen.query_one(f"#{widget_id}", Static).render())

        assert "MemAvailable 1.4 GiB" in text("pressure")
        assert text("peers").startswith(
            "low power vs peers in dsv41's TP group: 17.0 W vs peers' median 40.5 W "
            "(spark-1 40.5, spark-2 40.5); clock 2,400 vs 2,509 MHz; "
            "spark_hwmon: pl1 29.4 W at its 30 W cap, pl_level 1"
        )
        assert "41000" in text("processes") and "83.0 %" in text("processes")
        assert "enp1s0f0np0" in text("fabric")
        assert screen.query_one("#power-label", Label).display
        app.pop_screen()
        app.show_node_details("spark-1", "GPU-spark-1")
        await pilot.pause()
        other = app.screen
        assert isinstance(other, NodeDetailScreen)
        assert not other.query_one("#power-label", Label).display  # no driver: not shown
        assert not other.query_one("#peers", Static).display
        assert str(other.query_one("#fabric", Static).render()) == "n/a (not read)"
