"""The simulated cluster: GB10 nodes, engines on tensor-parallel groups of them, one clock.

:meth:`SimCluster.advance_to` moves the whole cluster forward in fixed steps of ``STEP_S``
simulated seconds, so a run is deterministic for a seed whatever the wall-clock timing of
the callers (servers call it before answering; the runner calls it on a timer). A TP group
computes at the pace of its slowest rank: an engine's rates are multiplied by the lowest
``pace`` of its nodes, and its nodes are loaded whenever it has running requests.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from sparktop.sim.engine import SPEC_ACCEPT, EngineModel, LoadSpec, SimRequest
from sparktop.sim.gpu import Fault, GpuModel
from sparktop.sim.hostfs import HostModel
from sparktop.sim.rates import ProfileRates
from sparktop.sim.scenarios import LONG_PROMPT_TOKENS

STEP_S = 0.1
"""Simulated seconds per model step."""

MAX_CATCH_UP_STEPS = 200_000
"""Bound on the steps one call may run (a suspended laptop must not hang the loop)."""

LOADED_TEMPS_C = (55.0, 54.0, 53.0, 56.0)
"""Loaded temperatures per node, cycled (the 4-Spark seed: 53–56 °C)."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    engine: str | None


def node_names(count: int) -> tuple[str, ...]:
    return tuple(f"spark-{i + 1}" for i in range(count))


def engine_names(count: int) -> tuple[str, ...]:
    return ("dsv41",) if count == 1 else tuple(f"dsv41-{i + 1}" for i in range(count))


class SimCluster:
    """Nodes and engines of one simulated cluster.

    Nodes are split into ``engines`` equal tensor-parallel groups in order (spark-1..4 →
    the first engine, …); leftover nodes idle. Node ``i``'s nominal clock is the profile's
    baseline clock ``i`` (cycled).
    """

    def __init__(
        self,
        rates: ProfileRates,
        *,
        nodes: int = 4,
        engines: int = 1,
        seed: int = 0,
        load: LoadSpec | None = None,
        model_name: str = "deepseek-ai/DeepSeek-V4.1-Flash-1017",
    ) -> None:
        if nodes < 1 or engines < 0 or (engines and nodes < engines):
            raise ValueError(f"cannot place {engines} engine(s) on {nodes} node(s)")
        self.rates = rates
        self.seed = seed
        self.now = 0.0
        self._steps = 0
        self._rng = random.Random(seed)
        names = node_names(nodes)
        group = nodes // engines if engines else 0
        self.groups: dict[str, tuple[str, ...]] = {
            name: names[i * group : (i + 1) * group] for i, name in enumerate(engine_names(engines))
        }
        member = {n: e for e, ns in self.groups.items() for n in ns}
        clocks = rates.baseline_clocks_mhz
        self.gpus: dict[str, GpuModel] = {}
        for i, name in enumerate(names):
            rng = random.Random(f"{seed}/{name}")
            gpu = GpuModel(
                node=name,
                index=0,
                uuid=f"GPU-{uuid.UUID(int=rng.getrandbits(128))}",
                nominal_clock_mhz=clocks[i % len(clocks)],
                loaded_temp_c=LOADED_TEMPS_C[i % len(LOADED_TEMPS_C)],
                rng=rng,
                vllm_pid=41_000 + 17 * i if name in member else None,
                host=HostModel(f"{seed}/{name}"),
            )
            if gpu.vllm_pid is not None:
                gpu.temp_c = gpu.loaded_temp_c  # the cluster has been serving for a while
            self.gpus[name] = gpu
        self.engines: dict[str, EngineModel] = {
            name: EngineModel(
                name=name,
                model_name=model_name,
                rates=rates,
                rng=random.Random(f"{seed}/{name}"),
                load=load or LoadSpec(),
            )
            for name in self.groups
        }
        self._step_all(0.0)

    def add_engine(
        self, name: str, rates: ProfileRates, model_name: str, load: LoadSpec
    ) -> EngineModel:
        """An engine on no TP group of the simulated nodes (a single-host server such as
        llama.cpp's, which the cluster's GPUs do not follow), stepped with the others."""
        if name in self.engines:
            raise ValueError(f"engine {name!r} already exists")
        engine = EngineModel(
            name=name,
            model_name=model_name,
            rates=rates,
            rng=random.Random(f"{self.seed}/{name}"),
            load=load,
        )
        self.groups[name] = ()
        self.engines[name] = engine
        return engine

    # -- time ------------------------------------------------------------------------------

    def advance_to(self, now: float) -> None:
        """Run whole steps up to simulated time ``now`` (idempotent for the past).

        Steps are counted as integers so the same seed gives the same run however the
        calls are spaced.
        """
        target = int(now / STEP_S + 1e-9)
        if target <= self._steps:
            return
        self._steps = max(self._steps, target - MAX_CATCH_UP_STEPS)
        while self._steps < target:
            self._steps += 1
            self.now = self._steps * STEP_S
            self._step_all(STEP_S)

    def _step_all(self, dt: float) -> None:
        now = self.now
        for name, engine in self.engines.items():
            group = [self.gpus[n] for n in self.groups[name]]
            engine.pace = min((g.pace for g in group), default=1.0) * engine.slowdown
            engine.step(now, dt)
            busy = engine.is_up(now) and bool(engine.running)
            for g in group:
                g.loaded = busy
        for gpu in self.gpus.values():
            gpu.step(dt)

    # -- faults ----------------------------------------------------------------------------

    def set_fault(self, node: str, fault: Fault) -> None:
        self.gpus[node].fault = fault

    def clear_faults(self) -> None:
        for gpu in self.gpus.values():
            gpu.fault = Fault.NONE
            gpu.host.clear()
        for engine in self.engines.values():
            engine.stalled = False

    def stall(self, engine: str, stalled: bool = True) -> None:
        """The engine deadlocks (or recovers): its running requests make no progress, its
        TP group's GPUs spin at ~96 % and 16–27 W, the server keeps answering."""
        self.engines[engine].stalled = stalled
        for node in self.groups[engine]:
            self.gpus[node].fault = Fault.STALLED if stalled else Fault.NONE

    def flood(self, engine: str, *, cached_fraction: float = 0.9) -> list[SimRequest]:
        """Long agent sessions return at once, mostly prefix-cache hits (``cached_fraction``).

        One session per free sequence slot, sized so their cached contexts take 99.5 % of the
        free KV pool the moment they are admitted (capped by ``max_model_len``), plus four
        more that must wait. Their uncached remainders then prefill, the pool runs out and
        vLLM preempts; the four extra keep the queue non-empty.
        """
        model = self.engines[engine]
        lim = model.limits
        out = 512
        slots = max(1, lim.max_num_seqs - len(model.running))
        cached = 0.995 * model.free_blocks * lim.block_size / slots
        prompt = int(min(lim.max_model_len - out - 1, cached / cached_fraction))
        reqs = []
        for i in range(slots + 4):
            size = prompt if i < slots else int(prompt * self._rng.uniform(0.9, 1.0))
            reqs.append(
                model.new_request(
                    self.now, size, out, tag="flood", cached_tokens=int(size * cached_fraction)
                )
            )
        return reqs

    def set_load(self, engine: str, load: LoadSpec) -> None:
        """Change an engine's background load now (clients and prompt lengths); clients
        already waiting on a request keep it."""
        model = self.engines[engine]
        if model.load != load:
            model.load = load
            model.set_clients(load.clients, self.now)

    def end_flood(self, engine: str) -> int:
        """The flood's sessions go away (aborted); how many were still in flight."""
        return self.engines[engine].abort_tagged("flood", self.now)

    def long_context(
        self, engine: str, prompt_tokens: int = LONG_PROMPT_TOKENS
    ) -> SimRequest | None:
        """One long-context request (default: the 4-Spark sweep's 512K prompt) unless one
        is already in flight. It prefills next to the background load at about the
        sweep's concurrency-1 rate (see :func:`~sparktop.sim.engine.prefill_concurrency`)."""
        model = self.engines[engine]
        if any(r.tag == "long-context" for r in (*model.running, *model.waiting)):
            return None
        out = model.limits.output_tokens
        prompt = min(prompt_tokens, model.limits.max_model_len - out)
        return model.new_request(self.now, prompt, out, tag="long-context")

    def set_spec_accept(self, engine: str, accept: float | None = None) -> None:
        """Set the engine's MTP acceptance per draft position (None: back to the baseline,
        :data:`~sparktop.sim.engine.SPEC_ACCEPT`); decode slows with the tokens per step."""
        self.engines[engine].spec_accept = SPEC_ACCEPT if accept is None else accept

    def restart(self, engine: str, downtime_s: float = 3.0) -> None:
        self.engines[engine].restart(self.now, downtime_s)
