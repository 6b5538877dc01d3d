"""``sparktop sim`` for the benchmarks, optionally with nvidia-smi taking time on each node.

The simulator answers nvidia-smi instantly; a real one spends time in NVML before it prints.
``--nvsmi-ms MS`` makes every simulated ``nvidia-smi`` call in a command take MS
milliseconds on the node (the probe has two calls, the one-off field check one), as wall
time that costs the node no CPU, so a poll's fan-out can overlap it as it would on real
nodes. Every other argument goes to ``sparktop sim`` unchanged.

Run: ``python benchmarks/simfarm.py --nvsmi-ms 40 --write-inventory /tmp/sim.yaml --nodes 64``
"""

from __future__ import annotations

import argparse
import asyncio
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, add_help=False)
    parser.add_argument("--nvsmi-ms", type=float, default=0.0)
    args, rest = parser.parse_known_args(argv)
    if args.nvsmi_ms > 0:
        slow_nvidia_smi(args.nvsmi_ms / 1000)
    from sparktop.cli import main as sparktop_main

    return int(sparktop_main(["sim", *rest]) or 0)


def slow_nvidia_smi(seconds: float) -> None:
    """Make every simulated node spend ``seconds`` per nvidia-smi call in a command."""
    from sparktop.sim.gb10 import Gb10Responder

    answer = Gb10Responder.__call__

    async def slow(self: Gb10Responder, command: str) -> tuple[str, int]:
        await asyncio.sleep(seconds * command.count("nvidia-smi "))
        return await answer(self, command)

    Gb10Responder.__call__ = slow  # type: ignore[method-assign]


if __name__ == "__main__":
    sys.exit(main())
