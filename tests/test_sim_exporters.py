"""The simulator's dcgm-exporter and node_exporter pages carry the real exporters' names,
types and label sets (``fixtures/dcgm``: pasted dcgm-exporter output and its counters list)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sparktop.sim.gpu import Fault
from tests.conftest import FIXTURES
from tests.sim_helpers import running_sim

DCGM = FIXTURES / "dcgm"
EXTRA_FIELDS = {
    # Fields a counters file can add, which sparktop reads (not in the default list).
    "DCGM_FI_DEV_MAX_SM_CLOCK",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
}


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _fixture_fields() -> dict[str, str]:
    """Field → type from default-counters.csv, commented-out (optional) fields included."""
    fields: dict[str, str] = {}
    for line in (DCGM / "dcgm-exporter-default-counters.csv").read_text().splitlines():
        parts = [p.strip() for p in line.lstrip("# ").split(",")]
        if len(parts) >= 2 and parts[0].startswith("DCGM_"):
            fields[parts[0]] = parts[1]
    return fields


def _fixture_label_keys() -> set[str]:
    text = (DCGM / "v100x4-metrics-fragment-1.prom").read_text()
    (family,) = text_string_to_metric_families(text)
    return set(family.samples[0].labels)


async def test_dcgm_page_uses_the_real_exporter_names_and_labels() -> None:
    async with running_sim(nodes=2, exporters=True, old_driver_nodes=("spark-2",)) as sim:
        sim.cluster.set_fault("spark-1", Fault.THERMAL)
        async with httpx.AsyncClient(trust_env=False) as client:
            new = (await client.get(f"http://{sim.dcgm['spark-1'].target}/metrics")).text
            old = (await client.get(f"http://{sim.dcgm['spark-2'].target}/metrics")).text
            mem = (await client.get(f"http://{sim.node_exporter['spark-1'].target}/metrics")).text
    known = _fixture_fields()
    labels = _fixture_label_keys()
    for page in (new, old):
        for name, family in _families(page).items():
            assert name in known or name in EXTRA_FIELDS, name
            if name in known:
                assert f"# TYPE {name} {known[name]}\n" in page, name
            for sample in family.samples:  # type: ignore[attr-defined]
                assert set(sample.labels) == labels
        for line in page.splitlines():
            if not line.startswith("#"):  # counters keep their bare name, no _total
                assert line.partition("{")[0] in known.keys() | EXTRA_FIELDS, line
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in new and "CLOCK_THROTTLE" not in new
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in old
    assert 'Hostname="spark-1"' in new
    memory = _families(mem)
    assert {"node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes"} <= set(memory)
    assert sim.dcgm["spark-1"].host != sim.dcgm["spark-2"].host  # one address per node
