"""Run a real Prometheus (and node_exporter) on loopback: for the tests and the benchmarks.

``start_prometheus(config, directory)`` writes ``prometheus.yml``, starts the ``prometheus``
binary (Debian's package) with a TSDB in ``directory``, listening on a free 127.0.0.1 port,
and waits for ``/-/ready``; ``start_node_exporter()`` starts ``prometheus-node-exporter`` with
only the meminfo collector. Both are stopped with ``close()`` (SIGTERM, then SIGKILL). The
binaries are looked up on ``PATH`` and in ``/usr/bin``; :func:`missing_binaries` says which
are not installed, so callers can skip with a reason.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

T = TypeVar("T")

PROMETHEUS = "prometheus"
NODE_EXPORTER = "prometheus-node-exporter"
READY_TIMEOUT_S = 30.0


def binary(name: str) -> str | None:
    """The path of ``name`` on PATH or in /usr/bin (Debian installs there), else None."""
    found = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin")
    return found


def missing_binaries(*names: str) -> list[str]:
    return [n for n in names or (PROMETHEUS, NODE_EXPORTER) if binary(n) is None]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def until(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout_s: float, what: str
) -> T:
    """Await ``probe()`` until ``ok`` holds (every 0.1 s); TimeoutError naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = await probe()
        if ok(result):
            return result
        if loop.time() > deadline:
            raise TimeoutError(f"{what} within {timeout_s:g} s (last: {result!r:.300})")
        await asyncio.sleep(0.1)


class Daemon:
    """A started binary listening on ``address``; ``log`` is its stderr file."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, log: Path) -> None:
        self.process = process
        self.address = address
        self.log = log

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    async def wait_http(self, path: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        async with httpx.AsyncClient(base_url=self.url, timeout=2.0, trust_env=False) as client:

            async def probe() -> int:
                if self.process.poll() is not None:
                    tail = self.log.read_text(errors="replace")[-800:]
                    raise RuntimeError(f"{self.log.stem} exited: {tail}")
                try:
                    return (await client.get(path)).status_code
                except httpx.HTTPError:
                    return 0

            await until(probe, lambda status: status == 200, timeout_s, f"{self.url}{path} ready")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class Prometheus(Daemon):
    """A real Prometheus; :meth:`query` is a plain instant query (for test assertions)."""

    async def query(self, expr: str) -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=self.url, timeout=10.0, trust_env=False) as client:
            response = await client.post("/api/v1/query", data={"query": expr})
            body = response.json()
        if body.get("status") != "success":
            raise RuntimeError(f"query {expr!r} failed: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    async def until_series(self, expr: str, count: int = 1, timeout_s: float = 30.0) -> list[Any]:
        """Query ``expr`` until it returns at least ``count`` series (bounded polling)."""

        async def probe() -> list[dict[str, Any]]:
            return await self.query(expr)

        return await until(probe, lambda r: len(r) >= count, timeout_s, f"{count} series of {expr}")


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=out, stdin=subprocess.DEVNULL
        )


async def start_prometheus(config: dict[str, Any], directory: Path) -> Prometheus:
    """Start Prometheus on ``config`` (a prometheus.yml document) with its TSDB in
    ``directory``; returns once ``/-/ready`` answers. RuntimeError if it cannot start."""
    path = binary(PROMETHEUS)
    if path is None:
        raise RuntimeError("prometheus is not installed (Debian: apt-get install prometheus)")
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    last: Exception | None = None
    for _attempt in range(3):  # a free port can be taken between the probe and the bind
        address = f"127.0.0.1:{free_port()}"
        args = [
            path,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={directory / 'tsdb'}",
            f"--web.listen-address={address}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
            "--web.enable-lifecycle",
        ]
        daemon = Prometheus(
            _start(args, directory / "prometheus.log"), address, directory / "prometheus.log"
        )
        try:
            await daemon.wait_http("/-/ready")
            return daemon
        except RuntimeError as exc:
            daemon.close()
            last = exc
    raise RuntimeError(f"prometheus did not start: {last}")


async def start_node_exporter(directory: Path) -> Daemon:
    """Start this machine's node_exporter (meminfo collector only) on a free loopback port."""
    path = binary(NODE_EXPORTER)
    if path is None:
        raise RuntimeError("prometheus-node-exporter is not installed")
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "node_exporter.log"
    last: Exception | None = None
    for _attempt in range(3):
        address = f"127.0.0.1:{free_port()}"
        args = [path, f"--web.listen-address={address}", "--collector.disable-defaults",
                "--collector.meminfo"]  # fmt: skip
        daemon = Daemon(_start(args, log), address, log)
        try:
            await daemon.wait_http("/metrics")
            return daemon
        except RuntimeError as exc:
            daemon.close()
            last = exc
    raise RuntimeError(f"node_exporter did not start: {last}")
