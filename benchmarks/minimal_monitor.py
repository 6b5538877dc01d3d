#!/usr/bin/env python3
"""The least a Python monitor of the same nodes can do: the reference of ``bench_limit``.

One asyncssh connection per node (the SSH library sparktop uses), each running the stream
command sparktop's SSH probe runs (given whole with ``--command``: one ``nvidia-smi
--query-gpu=… -lms 1000`` per node, rows read in chunks as they arrive), and once a tick
(``--interval``, 1 s) one parse of each node's latest interval: its CSV rows split into
fields and numbers, kept as the node's reading. No UI, no history, no alert rules, no slow
tier (memory, compute apps), no reconnects: what every monitor of these nodes must at least
do. It imports nothing from sparktop (the inventory is read with PyYAML at start-up).

Prints ``ready`` once every node has given a row, then nothing until it is stopped
(SIGINT/SIGTERM), when it prints how many ticks and rows it parsed.

Run: ``python benchmarks/minimal_monitor.py --inventory SIM.yaml --command '…'``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

import asyncssh
import yaml


class Node:
    """One node's stream: raw text as it arrives; ``parse`` reads the latest interval."""

    def __init__(self) -> None:
        self.text = ""
        self.header: list[str] = []
        self.reading: list[dict[str, float | str]] = []

    async def follow(self, spec: dict[str, object], command: str) -> None:
        conn = await asyncssh.connect(
            str(spec["host"]),
            port=int(spec["port"]),  # type: ignore[call-overload]
            username=str(spec["user"]),
            client_keys=[str(spec["identity_file"])],
            known_hosts=str(spec["known_hosts"]),
            config=None,
        )
        proc = await conn.create_process(command, stdin=asyncssh.DEVNULL)
        while chunk := await proc.stdout.read(65536):
            self.text += chunk

    def parse(self, gpus: int = 1) -> int:
        """Parse the last ``gpus`` complete rows (the latest interval); returns rows parsed."""
        lines = self.text.split("\n")
        self.text = lines[-1]  # an incomplete line waits for the next tick
        complete = [line for line in lines[:-1] if line]
        if not self.header and complete:
            self.header = [h.strip() for h in complete.pop(0).split(",")]
        rows = complete[-gpus:]
        reading = []
        for row in rows:
            fields: dict[str, float | str] = {}
            for name, cell in zip(self.header, row.split(","), strict=False):
                cell = cell.strip()
                try:
                    fields[name] = float(cell)
                except ValueError:
                    fields[name] = cell
            reading.append(fields)
        if reading:
            self.reading = reading
        return len(reading)


async def main_async(inventory: str, command: str, interval_s: float) -> tuple[int, int]:
    with open(inventory, encoding="utf-8") as fh:
        specs = yaml.safe_load(fh)["nodes"]
    nodes = [Node() for _ in specs]
    tasks = [asyncio.create_task(n.follow(s, command)) for n, s in zip(nodes, specs, strict=True)]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    ticks = rows = 0
    ready = False
    due = loop.time()
    while not stop.is_set():
        due += interval_s
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, due - loop.time()))
        for task in tasks:
            if task.done() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        ticks += 1
        rows += sum(n.parse() for n in nodes)
        if not ready and all(n.reading for n in nodes):
            ready = True
            print("ready", flush=True)
    for task in tasks:
        task.cancel()
    return ticks, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--command", required=True)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    ticks, rows = asyncio.run(main_async(args.inventory, args.command, args.interval))
    print(f"ticks {ticks} rows {rows}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
