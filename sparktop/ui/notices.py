"""What the monitor says when there is nothing to show: no NVIDIA driver, no engine yet."""

from __future__ import annotations

from collections.abc import Sequence

from sparktop.model import Source
from sparktop.plan import Plan
from sparktop.sources.build import LOCAL_ENGINE_URL

NO_DRIVER_TEXT = (
    "No NVIDIA driver on this machine (NVML / nvidia-smi not found), so there are no GPU "
    "readings here. Point sparktop at your cluster with --inventory cluster.yaml, or try "
    "'sparktop demo' for a simulated one."
)
NO_DRIVER_INVENTORY_TEXT = (
    "No NVIDIA driver on any node of {cluster} (NVML / nvidia-smi not found), so there are no "
    "GPU readings. Each row says what its node reported; Enter opens the node's details."
)


def no_driver_text(plan: Plan) -> str:
    """The notice when no node has an NVIDIA driver (``--inventory`` advice only when the
    monitor runs without one)."""
    if plan.inventory is None:
        return NO_DRIVER_TEXT
    return NO_DRIVER_INVENTORY_TEXT.format(cluster=plan.cluster)


NO_NODES_TEXT = "no nodes in the inventory: engines only (add nodes: for GPU readings)"
"""In place of the Nodes table when nothing reads a node: a header over no rows said
nothing (what k9s says for an empty view: one line, why it is empty); it fits 80 columns."""


def no_node_text(sources: Sequence[Source]) -> str:
    """The line that replaces the Nodes table when the monitor polls sources and none of
    them reads a node, else "" (no sources at all: a replay, fed its samples)."""
    if not sources or any(s.kind == "node" for s in sources):
        return ""
    return NO_NODES_TEXT


REPLAY_NO_ENGINE_TEXT = "the recording has no engine samples up to here"
"""The engines panel of a replay before any engine sample: nothing was tried, nothing polled."""


def no_engine_text(plan: Plan, sources: Sequence[Source]) -> str:
    """What the engines panel says before any engine sample: what was tried."""
    engines = [s.name for s in sources if s.kind == "engine"]
    if plan.inventory is not None:
        engines += [e.name for e in plan.engines if e.name not in engines]
    if engines:
        return f"waiting for the first scrape of {', '.join(engines)}…"
    if plan.inventory is not None:
        return "no inference server in the inventory (add one under engines:)"
    return (
        f"no inference server answering at {LOCAL_ENGINE_URL} (tried at start); name "
        "yours with --endpoint URL, or in an inventory (--inventory cluster.yaml, engines:)"
    )
