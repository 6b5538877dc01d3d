"""What the host rules remember between evaluations: RDMA ports seen up, and since when a
per-node fact (a rank's low power against its peers) has held.

Rules stay pure functions of their context; the alert engine owns one tracker, feeds it
every state (:meth:`HostTracker.observe`) and closes each evaluation (:meth:`end_round`).
"""

from __future__ import annotations

from sparktop.cluster import ClusterState

MAX_KEYS = 4096


class HostTracker:
    """``seen_up``: ``node/device/port`` of every RDMA port seen up in this run (a port that
    was never up is an unused port, not a link that went down)."""

    def __init__(self) -> None:
        self.seen_up: set[str] = set()
        self._onsets: dict[str, float] = {}
        self._touched: set[str] = set()

    def observe(self, state: ClusterState) -> None:
        for sample in state.nodes.values():
            if not sample.ok:
                continue
            for port in sample.fabric.ports:
                if port.up and len(self.seen_up) < MAX_KEYS:
                    self.seen_up.add(f"{sample.node}/{port.name}")

    def onset(self, key: str, time_s: float) -> float:
        """When ``key``'s fact began holding (``time_s`` the first time it is asked for)."""
        self._touched.add(key)
        if key not in self._onsets and len(self._onsets) < MAX_KEYS:
            self._onsets[key] = time_s
        return self._onsets.get(key, time_s)

    def end_round(self) -> None:
        """Forget the onsets of facts that did not hold in this evaluation."""
        for key in [k for k in self._onsets if k not in self._touched]:
            del self._onsets[key]
        self._touched.clear()
