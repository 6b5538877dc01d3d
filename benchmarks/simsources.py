"""Poll sources fed by the simulator's model in this process, on a clock the caller moves.

For benchmarks that need many polls faster than real time (the render tick, an hour of
history in a minute): node samples come from the simulated GB10 answering the real probe
command, parsed by sparktop's parser; engine samples from the simulated engine's real
``/metrics`` page, parsed and derived by sparktop's deriver. No sockets: the network path is
measured by ``bench_poll`` and ``bench_cpu``.

Example::

    sim = SimSources(nodes=8, engines=1, scenario="tour")
    plan = Plan.from_layout("sim", sim.groups)
    app = SparktopApp(plan, sim.sources, plan.alert_engine(), clock=sim.wall, autostart=False)
    sim.advance(1.0)            # one simulated second (plays the scenario)
    await app.poller.poll_once()
"""

from __future__ import annotations

import time

from prometheus_client import generate_latest

from sparktop.model import EngineSample, NodeSample, NodeState, Sample
from sparktop.sim.gb10 import Gb10Responder
from sparktop.sim.gpu import Fault
from sparktop.sim.metrics import EngineCollector, engine_registry
from sparktop.sim.model import SimCluster
from sparktop.sim.rates import ProfileRates
from sparktop.sim.scenarios import SCENARIOS, Act, Player
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import parse_engine_page
from sparktop.sources.nvsmi import parse_probe_output
from sparktop.sources.probe import FIELD_SETS, probe_command
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

PROBE = probe_command(FIELD_SETS[0])


class SimSources:
    """A simulated cluster and one poll source per node and engine. ``now`` is simulated
    seconds since start; ``wall()`` the matching Unix time (for the app's clock)."""

    def __init__(
        self, nodes: int, engines: int, *, scenario: str = "normal", seed: int = 0
    ) -> None:
        self.cluster = SimCluster(
            ProfileRates.load(DEFAULT_PROFILE, None, None), nodes=nodes, engines=engines, seed=seed
        )
        self.epoch = time.time()
        self.now = 0.0
        self.down: set[str] = set()
        group = next(iter(self.cluster.groups.values()), tuple(self.cluster.gpus))
        self._targets = (group[1 % len(group)], group[2 % len(group)], group[-1])
        self._player = Player(SCENARIOS[scenario], 0.0)
        self.nodes = [_Node(self, name) for name in self.cluster.gpus]
        self.engines = [_Engine(self, name) for name in self.cluster.engines]
        self.sources: list[_Node | _Engine] = [*self.nodes, *self.engines]
        self.groups = {e: list(ns) for e, ns in self.cluster.groups.items()}

    def wall(self) -> float:
        return self.epoch + self.now

    def advance(self, seconds: float) -> None:
        """Move simulated time on and carry out the scenario's due actions."""
        self.now += seconds
        self.cluster.advance_to(self.now)
        for act in self._player.due(self.cluster.now):
            self._apply(act)

    def _apply(self, act: Act) -> None:
        thermal, low_power, down = self._targets
        engine = next(iter(self.cluster.engines), None)
        c = self.cluster
        if act is Act.RECOVER:
            c.clear_faults()
            self.down.clear()
            if engine:
                c.end_flood(engine)
        elif act is Act.THERMAL:
            c.set_fault(thermal, Fault.THERMAL)
        elif act is Act.LOW_POWER:
            c.set_fault(low_power, Fault.LOW_POWER)
        elif act is Act.NODE_DOWN:
            self.down.add(down)
        elif act is Act.NODE_UP:
            self.down.discard(down)
        elif engine is None:
            return
        elif act is Act.FLOOD:
            c.flood(engine)
        elif act is Act.END_FLOOD:
            c.end_flood(engine)
        elif act is Act.RESTART:
            c.restart(engine)
        elif act is Act.LONG_CONTEXT:
            c.long_context(engine)


class _Node:
    kind = "node"

    def __init__(self, sim: SimSources, name: str) -> None:
        self.sim = sim
        self.name = name
        self.responder = Gb10Responder(sim.cluster.gpus[name])

    async def sample(self) -> Sample:
        wall = self.sim.wall()
        if self.name in self.sim.down:
            return NodeSample(
                node=self.name, time_s=wall, state=NodeState.UNREACHABLE,
                message="unreachable: connection refused (simulated)", since_s=wall,
            )  # fmt: skip
        text, _ = self.responder.run(PROBE)
        return parse_probe_output(self.name, text, wall)

    async def aclose(self) -> None:
        return None


class _Engine:
    kind = "engine"

    def __init__(self, sim: SimSources, name: str) -> None:
        self.sim = sim
        self.name = name
        self.url = f"http://sim.invalid/{name}"
        self.registry = engine_registry(
            EngineCollector(sim.cluster.engines[name], lambda t: sim.epoch + t)
        )
        self.deriver = MetricsDeriver(name)

    def page(self) -> str:
        return generate_latest(self.registry).decode()

    async def sample(self) -> EngineSample:
        wall = self.sim.wall()
        return self.deriver.derive(parse_engine_page(self.page()), now_s=self.sim.now, wall_s=wall)

    async def aclose(self) -> None:
        return None
