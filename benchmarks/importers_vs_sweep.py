"""Four benchmarks and two `sparktop sweep`s of one real vLLM, imported and compared cell by cell.

    python benchmarks/importers_vs_sweep.py --install-tools   # once: each tool in a venv of its own
    python benchmarks/importers_vs_sweep.py                   # start the real vLLM, run, compare
    python benchmarks/importers_vs_sweep.py --url http://127.0.0.1:8000 \\
        --tokenizer MODEL_DIR --vllm-python VENV/bin/python     # a server already running

Runs, against one server on loopback, with bounded settings (prompts x concurrencies below, a
few requests per cell, small outputs): `sparktop sweep` (A), then `vllm bench serve` (the one
in the server's own environment), GuideLLM, llama-benchy and AIPerf, then `sparktop sweep`
again (B). Each tool's result files are imported with `sparktop profiles --import` (the CLI,
so its warnings are seen too) and compared with the sweeps: the spread of A and B is each
cell's noise floor, and a tool's figure beyond it is marked. The table (markdown) is printed
and written to OUT/table.md; OUT keeps every result file, imported profile and log.

Without --url the server is the real vLLM the tests use (`tools/real_vllm.py serve`; install
it with `tools/real_vllm.py install`). The tools live in venvs under --toolenv, never in
sparktop's environment; GuideLLM needs torch, which is installed first as the CPU build
(torch==2.13.0) so pip does not pull a CUDA one. A missing tool is skipped and said so.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from importers_runs import TOOLS, Grid, Run, book_text, install_tools, run_tool  # noqa: E402
from importers_table import compare, summary  # noqa: E402

SERVER_FLAGS = "--max-model-len 2048 --max-num-seqs 4 --max-num-batched-tokens 512"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--url", help="a running server (default: start the real vLLM)")
    p.add_argument("--tokenizer", type=Path, help="model dir with tokenizer.json (with --url)")
    p.add_argument("--vllm-python", type=Path, help="python of the server's vLLM environment")
    p.add_argument(
        "--toolenv",
        type=Path,
        default=Path(os.environ.get("SPARKTOP_TOOLENV", "~/.cache/sparktop/toolenv")),
        help="where each tool's venv lives (default ~/.cache/sparktop/toolenv)",
    )
    p.add_argument("--install-tools", action="store_true", help="install missing tools, exit")
    p.add_argument("--tools", default=",".join(TOOLS), help="which tools (default: all)")
    p.add_argument("--prompts", default="128,512,1024", help="prompt tokens (default 128,512,1024)")
    p.add_argument("--concurrency", default="1,2,4", help="concurrencies (default 1,2,4)")
    p.add_argument("--output-tokens", type=int, default=32, help="per request (default 32)")
    p.add_argument("--requests", type=int, default=4, help="requests per cell per concurrency")
    p.add_argument("--runs", type=int, default=3, help="sweep runs per cell (default 3)")
    p.add_argument("--timeout", type=float, default=900, help="per tool run, s (default 900)")
    p.add_argument("--out", type=Path, help="result folder (default: a new one in /tmp)")
    return p.parse_args(argv)


def _real_server(log: Path) -> tuple[subprocess.Popen[str], dict[str, object], dict[str, str]]:
    tool = ROOT / "tools" / "real_vllm.py"
    if not tool.exists():
        sys.exit("no tools/real_vllm.py in this checkout: give --url (and --tokenizer)")
    status = subprocess.run(
        [sys.executable, str(tool), "status"], capture_output=True, text=True, check=False
    )
    if status.returncode != 0:
        sys.exit(f"the real vLLM is not installed: {status.stderr.strip()}")
    record: dict[str, str] = json.loads(status.stdout)
    proc = subprocess.Popen(
        [sys.executable, str(tool), "serve", "--log", str(log)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once the server answers
    if not line:
        sys.exit(f"the real vLLM did not start (log: {log})")
    return proc, json.loads(line), record


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tools fetch the book; its log lines would fill the output."""


def _serve_book(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """llama-benchy fetches its text corpus by URL: serve a local one on loopback."""
    (folder / "book.txt").write_text(book_text(), encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/book.txt"


def _sweep(run: Run, name: str) -> Path:
    g = run.grid
    out: Path = run.out / f"{name}.yaml"
    argv = [
        sys.executable, "-m", "sparktop", "sweep", "--endpoint", run.url, "--prompts",
        ",".join(map(str, g.prompts)), "--concurrency", ",".join(map(str, g.concurrency)),
        "--output-tokens", str(g.output_tokens), "--runs", str(run.sweep_runs), "-o", str(out),
        "--yes", "--max-num-seqs", "4", "--max-batched", "512",
    ]  # fmt: skip
    log = run.out / "logs" / f"{name}.log"
    with log.open("w") as fh:
        subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=True, cwd=ROOT)
    return out


def _import(run: Run, tool: str, files: list[Path]) -> tuple[Path, list[str]]:
    out = run.out / "profiles" / f"{tool}.yaml"
    out.parent.mkdir(exist_ok=True)
    out.unlink(missing_ok=True)
    argv = [
        sys.executable, "-m", "sparktop", "profiles", "--import", *map(str, files), "--name",
        tool, "-o", str(out), "--max-model-len", "2048", "--max-num-seqs", "4",
        "--max-batched", "512",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"profiles --import of {tool} failed: {done.stderr.strip()}")
    return out, [line for line in done.stderr.splitlines() if line.startswith("warning:")]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    toolenv = args.toolenv.expanduser()
    chosen = [t for t in args.tools.split(",") if t]
    if unknown := set(chosen) - set(TOOLS):
        sys.exit(f"unknown tools {sorted(unknown)}; known: {', '.join(TOOLS)}")
    if args.install_tools:
        install_tools(toolenv, [t for t in chosen if t != "vllm-bench"])
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="importers-vs-sweep-"))
    (out / "logs").mkdir(parents=True, exist_ok=True)
    grid = Grid(
        tuple(int(p) for p in args.prompts.split(",")),
        tuple(int(c) for c in args.concurrency.split(",")),
        args.output_tokens,
        args.requests,
    )
    server = None
    if args.url:
        if not args.tokenizer:
            sys.exit("--url needs --tokenizer MODEL_DIR (the tools count prompt tokens with it)")
        url, tokenizer, vllm_python = args.url.rstrip("/"), args.tokenizer, args.vllm_python
        model = json.loads(subprocess.check_output(["curl", "-s", f"{url}/v1/models"]))
        served = str(model["data"][0]["id"])
    else:
        server, info, record = _real_server(out / "logs" / "server.log")
        url, served = str(info["url"]), str(info["model"])
        root = Path(str(record["root"]))
        tokenizer, vllm_python = root / "model", args.vllm_python or root / "venv/bin/python"
    book, book_url = _serve_book(out)
    run = Run(out, url, served, tokenizer, vllm_python, toolenv, grid, args.runs, book_url)
    started = time.monotonic()
    try:
        sweeps = [_sweep(run, "sweep-a")]
        imported: dict[str, Path] = {}
        notes: list[str] = []
        for tool in chosen:
            result = run_tool(run, tool, args.timeout)
            if isinstance(result, str):
                notes.append(f"{tool}: skipped: {result}")
                print(notes[-1], file=sys.stderr)
                continue
            imported[tool], warnings = _import(run, tool, result)
            notes += [f"{tool}: {w}" for w in warnings]
        sweeps.append(_sweep(run, "sweep-b"))
    finally:
        book.shutdown()
        if server is not None:
            server.terminate()  # the launcher stops the server's process group on SIGTERM
            server.wait(60)
    from sparktop.sweep.profiles.loader import load_profile_file

    a, b = (load_profile_file(p).rows for p in sweeps)
    tools = {t: load_profile_file(p).rows for t, p in imported.items()}
    table, outcomes = compare((a, b), tools, grid.prompts, grid.concurrency)
    text = "\n".join(
        [
            f"Server: {url} ({served}), vLLM flags {SERVER_FLAGS}. Grid: prompts "
            f"{', '.join(map(str, grid.prompts))} x concurrency "
            f"{', '.join(map(str, grid.concurrency))}, {grid.output_tokens} output tokens; "
            f"{time.monotonic() - started:.0f} s in all. Results: {out}",
            "",
            table,
            summary(outcomes),
            *(f"- {n}" for n in notes),
        ]
    )
    (out / "table.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
