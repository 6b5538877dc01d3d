"""In-process fake GB10 nodes and vLLM engines for previewing and testing the UI.

Numbers follow the seeds: GB10 SM clocks near 2.5 GHz under load (max 3003, the 4-Spark
seed's 2509/2522/2509/2541 MHz at 53–56 °C), unified memory (``memory.*`` ``[N/A]``), the
4-Spark KV pool of 11,434,628 tokens and its sweep's decode rates. Faults can be switched on
per source (``throttle``, ``low_power``, ``down``). Not a simulator: no SSH, no HTTP (see
``sparktop.sim`` for that). Run ``python -m sparktop.ui.preview [--gpus N] [--engines M]``.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable

from sparktop.model import (
    NA,
    EngineSample,
    EngineState,
    GpuSample,
    NodeMemory,
    NodeSample,
    NodeState,
    Quantile,
    RankStats,
)

BASE_CLOCKS = (2509.0, 2522.0, 2509.0, 2541.0)
MEM_TOTAL_MIB = 124_546.0
POOL_TOKENS = 11_434_628


class FakeNode:
    """A GB10 node (one GPU per node unless ``gpus`` says otherwise)."""

    kind = "node"

    def __init__(
        self,
        name: str,
        index: int = 0,
        gpus: int = 1,
        *,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.index = index
        self.gpus = gpus
        self.clock = clock
        self.rng = random.Random(seed or index + 1)
        self.throttle = False
        self.low_power = False
        self.down: str | None = None
        self._down_since: float | None = None
        self.polls = 0

    async def sample(self) -> NodeSample:
        now = self.clock()
        self.polls += 1
        if self.down:
            if self._down_since is None:
                self._down_since = now
            return NodeSample(
                self.name, now, NodeState.UNREACHABLE, self.down, since_s=self._down_since
            )
        self._down_since = None
        gpus = tuple(self._gpu(i) for i in range(self.gpus))
        used = 108_000.0 + self.rng.uniform(-300, 300)
        memory = NodeMemory(MEM_TOTAL_MIB, used, 101_200.0 * self.gpus, unified=True)
        raw = "\n".join(f"{g.index}, {g.uuid}, {g.name}, {g.sm_clock_mhz:.0f}" for g in gpus)
        return NodeSample(
            self.name,
            now,
            gpus=gpus,
            memory=memory,
            latency_s=0.031,
            raw=raw,
            driver_version="580.95.05",
        )

    def _gpu(self, i: int) -> GpuSample:
        base = BASE_CLOCKS[(self.index + i) % len(BASE_CLOCKS)]
        wobble = math.sin(self.polls / 7 + self.index) * 12 + self.rng.uniform(-6, 6)
        clock, temp, power, mask = base + wobble, 54.0 + self.rng.uniform(-1, 2), 52.0, 0x0
        util = 96.0 + self.rng.uniform(-3, 3)
        if self.throttle:
            clock, temp, power, mask = 1833.0, 91.0, 38.02, 0x20
        if self.low_power:
            clock, temp, power, util = 513.0, 47.0, 14.9, 100.0
        return GpuSample(
            index=i,
            uuid=f"GPU-5f1c{self.index:04x}-0000-0000-0000-{i:012x}",
            name="NVIDIA GB10",
            sm_clock_mhz=round(clock),
            max_sm_clock_mhz=3003.0,
            temperature_c=round(temp),
            power_w=round(power + self.rng.uniform(-2, 2), 2),
            utilization_pct=round(min(util, 100.0)),
            memory_used_mib=NA("[N/A]"),
            memory_total_mib=NA("[N/A]"),
            pstate="P0",
            clock_event_mask=mask,
            process_memory_mib=101_200.0,
        )

    async def aclose(self) -> None:
        return None


class FakeEngine:
    """A vLLM engine serving the 4-Spark profile's load (decode ≈ 361 tok/s at 8 × 4K)."""

    kind = "engine"

    def __init__(
        self,
        name: str,
        *,
        ranks: int = 1,
        seed: int = 0,
        max_num_seqs: int = 8,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.ranks = ranks
        self.clock = clock
        self.rng = random.Random(seed or 7)
        self.max_num_seqs = max_num_seqs
        self.polls = 0
        self.slow = 1.0
        self.status: EngineState = EngineState.OK
        self.message = ""
        self.restart_next = False

    async def sample(self) -> EngineSample:
        now = self.clock()
        self.polls += 1
        if self.status is not EngineState.OK:
            return EngineSample(self.name, now, self.status, self.message, since_s=now)
        kv = min(0.99, 0.35 + 0.25 * (1 + math.sin(self.polls / 15)) + self.rng.uniform(0, 0.02))
        running = float(self.max_num_seqs)
        decode = 361.0 * self.slow + self.rng.uniform(-12, 12)
        restarted, self.restart_next = self.restart_next, False
        ranks = (
            tuple(
                RankStats(
                    str(r),
                    running / self.ranks,
                    0.0,
                    kv,
                    POOL_TOKENS / self.ranks,
                    0.0,
                    3534.4 / self.ranks,
                    decode / self.ranks,
                )
                for r in range(self.ranks)
            )
            if self.ranks > 1
            else ()
        )
        return EngineSample(
            engine=self.name, time_s=now, model="deepseek-ai/DeepSeek-V4.1-Flash",
            running=running, waiting=2.0 if kv > 0.8 else 0.0, kv_usage=kv,
            kv_pool_tokens=float(POOL_TOKENS), kv_pool_source="cache_config_info",
            kv_used_tokens=kv * POOL_TOKENS, kv_free_tokens=(1 - kv) * POOL_TOKENS,
            preemptions_per_s=0.0, prefill_tps=3534.4 + self.rng.uniform(-50, 50),
            decode_tps=decode, ttft_p50=Quantile(8.43 / self.slow),
            ttft_p95=Quantile(9.9 / self.slow), itl_p50=Quantile(0.021 * self.slow),
            itl_mean_s=self.slow / 45.0,
            mean_prompt_tokens=3800.0, prefix_hit_rate=0.0, max_model_len=1_048_576.0,
            max_num_seqs=float(self.max_num_seqs), max_num_batched_tokens=8192.0,
            restarted=restarted, ranks=ranks, latency_s=0.012,
        )  # fmt: skip

    async def aclose(self) -> None:
        return None


def fake_cluster(
    nodes: int = 4, gpus_per_node: int = 1, engines: int = 1, clock: Callable[[], float] = time.time
) -> tuple[list[FakeNode], list[FakeEngine]]:
    """``nodes`` fake Sparks named spark-1… and ``engines`` engines named dsv41, dsv41-2…"""
    node_list = [FakeNode(f"spark-{i + 1}", i, gpus_per_node, clock=clock) for i in range(nodes)]
    engine_list = [
        FakeEngine("dsv41" if i == 0 else f"dsv41-{i + 1}", seed=i + 7, clock=clock)
        for i in range(engines)
    ]
    return node_list, engine_list


def main() -> int:
    parser = argparse.ArgumentParser(description="Preview the sparktop UI on fake sources.")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=1, help="GPUs per node")
    parser.add_argument("--engines", type=int, default=1)
    parser.add_argument("--theme")
    args = parser.parse_args()
    from sparktop.ui.app import run_tui

    nodes, engines = fake_cluster(args.nodes, args.gpus, args.engines)
    if len(nodes) > 2:
        nodes[2].throttle = True
    return run_tui(
        None,
        sources=[*nodes, *engines],
        theme=args.theme,
        cluster="preview",
        tp_groups={e.name: tuple(n.name for n in nodes) for e in engines[:1]},
    )


if __name__ == "__main__":
    raise SystemExit(main())
