"""Command palette provider: jump to a node or engine, or open its detail screen."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from sparktop.cluster import ClusterState


class Cluster(Protocol):
    """What the palette offers and calls: the app (which Textual hands every provider)."""

    state: ClusterState
    node_states: Mapping[str, tuple[str, str]]

    def jump_to_node(self, node: str) -> None: ...
    def show_node_details(self, node: str, gpu_key: str | None = None) -> None: ...
    def jump_to_engine(self, engine: str) -> None: ...
    def show_engine_details(self, engine: str) -> None: ...
    def show_curve(self, engine: str) -> None: ...


class ClusterCommands(Provider):
    """``node spark-3`` jumps to its row, ``details spark-3`` opens it, ``engine dsv41`` scrolls."""

    def _commands(self) -> list[tuple[str, object, str]]:
        app = cast(Cluster, self.app)
        found: list[tuple[str, object, str]] = []
        for node, sample in app.state.nodes.items():
            # The state as the Nodes table shows it (``throttled``, ``low-power?``, ``down…``).
            status = app.node_states.get(node, (str(sample.state), ""))[0]
            found.append(
                (
                    f"node {node}",
                    partial(app.jump_to_node, node),
                    f"Jump to {node} in the Nodes table ({status})",
                )
            )
            found.append(
                (
                    f"details {node}",
                    partial(app.show_node_details, node),
                    f"Open {node}'s detail screen: GPU fields, probe output, history",
                )
            )
        for engine in app.state.engines:
            found.append(
                (
                    f"engine {engine}",
                    partial(app.jump_to_engine, engine),
                    f"Scroll to {engine} in the Engines panel",
                )
            )
            found.append(
                (
                    f"details {engine}",
                    partial(app.show_engine_details, engine),
                    f"Open {engine}'s detail screen: TTFT as queue + prefill, spec decode, "
                    "every figure with its reason",
                )
            )
            found.append(
                (
                    f"curve {engine}",
                    partial(app.show_curve, engine),
                    f"Draw {engine}'s live window on the profile's TTFT / aggregate curve",
                )
            )
        return found

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(Content(name), callback, text=name, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, text=name, help=help_text)  # type: ignore[arg-type]
