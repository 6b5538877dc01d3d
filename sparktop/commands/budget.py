"""``sparktop budget``: will this context fit, and how long will it take? (DESIGN.md §7)"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import sys
from pathlib import Path
from typing import Any

from sparktop import values
from sparktop.commands.exits import exit_status
from sparktop.errors import RuntimeFailure, UserError
from sparktop.safe_text import (
    check_url_option,
    cut_credentials,
    dumps_printable,
    printable,
    printable_lines,
)
from sparktop.sources.engines.kinds import KINDS
from sparktop.sweep.budget.counts import check_count, parse_size
from sparktop.sweep.tokens.tokens import SEND_CAP_NOTE

DESCRIPTION = """\
Budget a context before sending it: count its tokens, check it against max_model_len, the
KV-cache pool and max_num_batched_tokens, and look up TTFT, prefill, decode and aggregate
throughput in a sweep profile. Every figure is tagged: [here] computed here, [profile] from
the profile (measured by others on their cluster), [given], [server] (live, with --endpoint).
The estimator uses the whole table (log-log between close rows, a fitted model elsewhere),
gives every time figure a band, extrapolates at most 2x past the table and says "no data"
beyond."""

EPILOG = """\
examples:
  sparktop budget --prompt-tokens 2048 --concurrency 6 --profile 2x-spark-dsv4-flash-0731
  sparktop budget --prompt-tokens 899994 --profile 2x-spark-dsv4-flash-0731
  sparktop budget --scan-dir ./src --ext .py,.md --concurrency 2
  sparktop budget --file prompt.txt --endpoint http://192.168.10.10:8015   # exact count + free KV
  sparktop budget --file prompt.txt --tokenizer ./tokenizer.json           # exact, offline
  sparktop budget --prompt-tokens 40000 --profile ./my-sweep.yaml --json
  sparktop budget --prompt-tokens 65536 --concurrency 4 --plot budget.svg  # the curves, ▲ marked

Over max_model_len: vLLM >= 0.32 serves the request with the output cut to max_model_len -
prompt tokens, older vLLM refuses it; with --endpoint the server's /version decides, else
both are said (docs/budget.md).
Token estimate without a tokenizer: CJK characters 1:1, other characters / --chars-per-token.
Profiles: 'sparktop profiles'. JSON schema: sparktop.budget/1 (sparktop/sweep/README.md).

""" + exit_status(
    [
        (0, "the budget is printed (with --endpoint: from live data)"),
        (1, "--endpoint was given but the server could not be reached or did not answer "
            "usefully: the budget is still printed, from the profile and the estimate, and a "
            "one-line warning on stderr says what is missing (free KV, exact token count) and "
            "why"),
        (2, "a bad option, file or profile (one line on stderr, nothing printed)"),
    ]
)  # fmt: skip


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "budget",
        help="will a context fit, and how long will it take",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--prompt-tokens",
        type=_prompt_tokens,
        metavar="N",
        help="prompt tokens per request (128k = 131,072, as 'sparktop sweep --prompts' reads it)",
    )
    source.add_argument("--scan-dir", metavar="DIR", help="count every text file under DIR")
    source.add_argument("--file", metavar="FILE", help="count one file ('-' reads stdin)")
    parser.add_argument("--ext", metavar="EXTS", help="with --scan-dir: only these, e.g. .py,.md")
    parser.add_argument(
        "--chars-per-token",
        type=float,
        default=4.0,
        metavar="X",
        help="non-CJK characters per token for the estimate (default 4.0)",
    )
    parser.add_argument(
        "--max-file-mb",
        type=float,
        default=32.0,
        metavar="MB",
        help="with --scan-dir: skip files larger than this (default 32)",
    )
    parser.add_argument("--concurrency", type=int, metavar="C", help="default 1")
    parser.add_argument("--output-tokens", type=int, metavar="O", help="per request (default 2048)")
    parser.add_argument(
        "--profile", metavar="NAME|PATH", help="sweep profile (default 4x-spark-dsv41-flash-1017)"
    )
    parser.add_argument(
        "--endpoint",
        metavar="URL",
        help="a running server's base URL: exact count via /tokenize, free KV via /metrics",
    )
    parser.add_argument(
        "--max-send-mb",
        type=float,
        default=8.0,
        metavar="MB",
        help="with --endpoint: send at most this much text to /tokenize (default 8); a larger "
        "--scan-dir is estimated locally instead, and the output says so",
    )
    parser.add_argument(
        "--kind",
        choices=sorted(KINDS),
        help="with --endpoint: the server's kind, which decides the /tokenize request "
        "(default: found out: a server answering GET /props is llama.cpp, else vLLM's shape)",
    )
    parser.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding the bearer token"
    )
    parser.add_argument("--tokenizer", metavar="PATH", help="count exactly with a tokenizer.json")
    parser.add_argument("--kv-pool", type=int, metavar="T", help="KV pool tokens (override)")
    parser.add_argument("--max-model-len", type=int, metavar="L", help="override max_model_len")
    parser.add_argument(
        "--max-batched", type=int, metavar="T", help="override max_num_batched_tokens"
    )
    parser.add_argument("--max-num-seqs", type=int, metavar="S", help="override max_num_seqs")
    parser.add_argument("--json", action="store_true", help="print the stable JSON document")
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.svg",
        help="also write the profile's TTFT and aggregate curves with this context marked, "
        "as SVG (replaced if it exists)",
    )
    return parser


def _prompt_tokens(text: str) -> int:
    """``--prompt-tokens``: a whole number, or a size such as ``10k`` (bounds: ``_check``)."""
    try:
        sized = parse_size(text)
        return sized if sized is not None else int(text)
    except (UserError, ValueError):
        raise argparse.ArgumentTypeError(
            f"not a token count: {text!r} (a whole number, or a size such as 10k or 1m)"
        ) from None


MAX_FILE_MB = 4096
"""Largest --max-file-mb: with an exact count a scanned file is held in memory whole."""


def _check(args: argparse.Namespace) -> None:
    checks = [
        ("--prompt-tokens", args.prompt_tokens, 1),
        ("--concurrency", args.concurrency, 1),
        ("--output-tokens", args.output_tokens, 0),
        ("--kv-pool", args.kv_pool, 1),
        ("--max-model-len", args.max_model_len, 1),
        ("--max-batched", args.max_batched, 1),
        ("--max-num-seqs", args.max_num_seqs, 1),
    ]
    for flag, value, low in checks:
        if value is not None:
            check_count(flag, value, low)  # the budget pane's fields take the same bounds
    if args.max_file_mb > MAX_FILE_MB:
        raise UserError(f"--max-file-mb must be at most {MAX_FILE_MB:,}, got {args.max_file_mb}")
    if not args.chars_per_token > 0:
        raise UserError(f"--chars-per-token must be > 0, got {args.chars_per_token}")
    if not args.max_file_mb > 0:
        raise UserError(f"--max-file-mb must be > 0, got {args.max_file_mb}")
    if not 0 < args.max_send_mb <= MAX_FILE_MB:
        raise UserError(
            f"--max-send-mb must be > 0 and at most {MAX_FILE_MB:,}, got {args.max_send_mb}"
        )
    if args.ext and not args.scan_dir:
        raise UserError("--ext only applies to --scan-dir")
    if args.endpoint:
        check_url_option("--endpoint", args.endpoint)
    if args.kind and not args.endpoint:
        raise UserError("--kind applies to --endpoint (the server's /tokenize shape)")
    if args.tokenizer and args.endpoint:
        raise UserError("use either --tokenizer or --endpoint for the exact count, not both")
    if args.tokenizer and args.prompt_tokens is not None:
        raise UserError("--tokenizer counts --file or --scan-dir; --prompt-tokens is a count")
    if args.tokenizer and not os.path.isfile(os.path.expanduser(args.tokenizer)):
        what = "is not a file" if os.path.exists(args.tokenizer) else "no such file"
        raise UserError(f"--tokenizer {args.tokenizer}: {what} (expected a tokenizer.json)")


def _api_key(args: argparse.Namespace) -> str | None:
    if not args.api_key_env:
        return None
    key = os.environ.get(args.api_key_env)
    if not key:
        raise UserError(f"environment variable {args.api_key_env} is not set")
    return key


def _count(args: argparse.Namespace, api_key: str | None) -> tuple[Any, RuntimeFailure | None]:
    """The token count, and the endpoint's failure when the exact count fell back."""
    from sparktop.sweep.tokens import scan
    from sparktop.sweep.tokens import tokens as tk

    if args.prompt_tokens is not None:
        return tk.TokenCount(args.prompt_tokens, "given", source="--prompt-tokens"), None
    exact: tk.Counter_ | None = None
    method = "estimated"
    endpoint = None
    if args.tokenizer:
        from sparktop.sweep.tokens import exact_tokens as ex

        exact, method = ex.load_tokenizer(args.tokenizer), "exact (tokenizer.json)"
    elif args.endpoint:
        from sparktop.sweep.tokens import exact_tokens as ex

        cap = int(args.max_send_mb * 1024 * 1024)
        endpoint = ex.EndpointTokenizer(args.endpoint, api_key, kind=args.kind, max_send_bytes=cap)
        exact, method = endpoint, "exact (/tokenize)"

    stdin = None
    if args.file == "-" and exact is not None:
        # Kept (the exact count needs the whole text anyway) so the estimate can reread it.
        stdin = io.BytesIO(sys.stdin.buffer.read())

    def run(counter: tk.Counter_ | None, how: str) -> tk.TokenCount:
        if args.scan_dir:
            max_bytes = int(args.max_file_mb * 1024 * 1024)
            return scan.scan_directory(
                args.scan_dir, args.ext, args.chars_per_token, max_bytes, counter, how
            )
        if stdin is not None:
            stdin.seek(0)
        return tk.count_file(args.file, args.chars_per_token, counter, how, stdin=stdin)

    try:
        count = run(exact, method)
        if endpoint is not None and isinstance(endpoint.max_model_len, int):
            count = dataclasses.replace(count, max_model_len=endpoint.max_model_len)
        return count, None
    except tk.SendCapReached:
        assert endpoint is not None
        note = tk.send_cap_note(endpoint.max_send_bytes, flag=True)
        return tk.with_note(run(None, "estimated"), note), None
    except RuntimeFailure as exc:
        # The exact count failed (server down): say so and fall back to the estimate.
        note = f"exact count unavailable ({exc}); estimated"
        return tk.with_note(run(None, "estimated"), note), exc
    finally:
        if endpoint is not None:
            endpoint.close()


LIVE_TIMEOUT_S = 5.0
"""Each step of the live scrape; the whole scrape ends within twice that."""


def _live(url: str, api_key: str | None) -> Any:
    import asyncio

    from sparktop.sources.engines.source import scrape_once

    return asyncio.run(scrape_once(url, api_key=api_key, timeout_s=LIVE_TIMEOUT_S))


def _tcp_reason(url: str, timeout_s: float = 3.0) -> str | None:
    """Why nothing accepts a TCP connection at ``url``'s host and port; None when it does."""
    import socket
    from urllib.parse import urlsplit

    from sparktop.sweep.tokens.exact_tokens import connect_reason

    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return str(exc)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=timeout_s).close()
    except OSError as exc:
        return connect_reason(exc)
    return None


def endpoint_problem(
    url: str,
    count_failure: RuntimeFailure | None,
    live: Any,
    *,
    kv_pool_given: bool = False,
    profile_named: bool = False,
) -> str | None:
    """One line on what ``--endpoint`` could not give, and why; None when it gave everything.

    ``live`` is the scraped :class:`~sparktop.model.EngineSample`; ``count_failure`` the
    error of the exact count (None when it worked or was not asked for); without the live
    pool, and ``--kv-pool`` not given (``kv_pool_given``), the line says to give it: the
    check used the pool of the profile ``--profile`` named (``profile_named``), else had none.
    """
    live_ok = live is None or live.ok
    if live_ok and count_failure is None:
        return None
    missing = []
    if not live_ok:
        missing.append("free KV")
    if count_failure is not None:
        missing.append("exact token count")
    lost = " and ".join(missing) + (" are" if len(missing) > 1 else " is") + " not available"
    if not live_ok and not kv_pool_given:
        used = "used the profile's pool" if profile_named else "had no pool"
        lost += f" (the KV check {used}: give yours with --kv-pool T)"
    if count_failure is not None and " unreachable (" in str(count_failure):
        return f"{count_failure}: {lost}"
    reason = None if live_ok else _tcp_reason(url)
    if reason is not None:
        return f"endpoint {url} unreachable ({reason}): {lost}"
    if live_ok:
        return f"{count_failure}: {lost}"  # it names the URL (``…/tokenize answered HTTP 500``)
    state, message = live.state.value, live.message
    because = message if message.startswith(state) else f"{state}: {message}".rstrip(": ")
    # It accepted a TCP connection (checked above), so it is not "unreachable" as a host.
    head = f"endpoint {url} accepts connections but gave no usable metrics ({because})"
    if count_failure is not None:
        head += f"; {count_failure}"  # a slow /tokenize: said as slow, not as unreachable
    return f"{head}: {lost}"


def run(args: argparse.Namespace) -> int:
    """``sparktop budget``; the endpoint's ``user:password@`` never reaches the output."""
    try:
        return _run(args)
    except (UserError, RuntimeFailure) as exc:
        if not args.endpoint:
            raise
        raise type(exc)(cut_credentials(str(exc), args.endpoint)) from None


def _run(args: argparse.Namespace) -> int:
    _check(args)
    if args.plot is not None:
        from sparktop.ui.curve_file import check_plot_path

        check_plot_path(args.plot)
    from sparktop.sweep.budget.budget import Origin, compute_budget
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

    profile = load_profile(args.profile or DEFAULT_PROFILE)
    api_key = _api_key(args)
    count, count_failure = _count(args, api_key)
    if count_failure is not None and " is not an HTTP server (" in str(count_failure):
        raise count_failure  # an SSH port, say: no budget against it, and said at once
    if count.note.startswith(SEND_CAP_NOTE):
        print(f"sparktop: note: {count.note}", file=sys.stderr)
    if count.tokens < 1:
        where = args.scan_dir or args.file
        files = ""
        if args.scan_dir:
            counted = values.counted(count.files_counted, "file")
            files = f"; {counted} counted, {count.files_skipped:,} skipped"
        raise UserError(f"{where}: no text to count (0 tokens{files})")
    live = _live(args.endpoint, api_key) if args.endpoint else None
    budget = compute_budget(
        count,
        1 if args.concurrency is None else args.concurrency,
        profile,
        args.output_tokens,
        kv_pool_tokens=args.kv_pool,
        max_model_len=args.max_model_len,
        max_num_batched_tokens=args.max_batched,
        max_num_seqs=args.max_num_seqs,
        live=live,
        # The default profile gives the times, but a server it was not named for has its own
        # limits: only the server's or the command line's count (sparktop/plan.py's rule).
        profile_limits=args.profile is not None or not args.endpoint,
    )
    if args.concurrency is None:
        budget = dataclasses.replace(budget, concurrency_origin=Origin.DEFAULT)
    # Each report loads only with the output asked for (the JSON one loads the sample types).
    if args.json:
        from sparktop.report.budget_json import to_json

        text = dumps_printable(to_json(budget), indent=2) + "\n"
    else:
        from sparktop.report.budget_text import render_text

        text = printable_lines(render_text(budget))
    sys.stdout.write(cut_credentials(text, args.endpoint) if args.endpoint else text)
    if args.plot is not None:
        from sparktop.ui.curve_file import budget_panels, write_plot

        conc = 1 if args.concurrency is None else args.concurrency
        title = f"sparktop budget: {count.tokens:,} prompt tokens × {conc}"
        write_plot(args.plot, budget_panels(profile, count.tokens, conc), title)
    problem = None
    if args.endpoint:
        given = args.kv_pool is not None
        problem = endpoint_problem(
            args.endpoint,
            count_failure,
            live,
            kv_pool_given=given,
            profile_named=args.profile is not None,
        )
    if problem is not None:
        # Live data was asked for and not obtained: the budget above is profile-only.
        sys.stdout.flush()
        print(
            f"sparktop: warning: {printable(cut_credentials(problem, args.endpoint))}",
            file=sys.stderr,
        )
        return 1
    return 0
