"""The stable ``--json`` document of a budget (schema ``sparktop.budget/1``).

Every key is always present; a figure is ``{"value", "origin", "reason"}`` with ``value`` null
and ``reason`` set when there is no data; estimated figures add the band ``low``/``high``
(``band_reason`` says why they are null beside a value), ``basis`` and ``how``. The
shape is documented in ``sparktop/sweep/README.md``.
"""

from __future__ import annotations

from typing import Any

from sparktop.model import NA, is_num
from sparktop.sweep.budget.budget import SCHEMA, Budget, Figure, Origin
from sparktop.sweep.estimator.estimator import Estimated


def _why(value: object) -> str:
    return value.reason if isinstance(value, NA) else "not available"


def _jnum(value: object) -> float | int | None:
    if not is_num(value):
        return None
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else round(value, 4)


def _jfig(fig: Figure) -> dict[str, Any]:
    value = _jnum(fig.value)
    return {
        "value": value,
        "origin": fig.origin.value,
        "reason": None if value is not None else _why(fig.value),
    }


def _jest(fig: Estimated) -> dict[str, Any]:
    value = _jnum(fig.value)
    return {
        "value": value,
        "low": _jnum(fig.low) if value is not None else None,
        "high": _jnum(fig.high) if value is not None else None,
        "origin": Origin.PROFILE.value,
        "basis": fig.basis.value,
        "how": fig.how,
        "reason": None if value is not None else _why(fig.value),
        # Why a figure with a value has no band (one cell, too few cells); null otherwise.
        "band_reason": fig.low.reason if value is not None and isinstance(fig.low, NA) else None,
    }


def to_json(b: Budget) -> dict[str, Any]:
    """The ``--json`` document (schema ``sparktop.budget/1``; keys are always present)."""
    t = b.tokens
    p = b.profile
    return {
        "schema": SCHEMA,
        "profile": {
            "name": p.name,
            "origin": p.origin,
            "source": p.source,
            "aggregate_kind": p.aggregate_kind,
            "output_tokens": _jnum(p.output_tokens),
            "describes_server": b.describes_server,
        },
        "tokens": {
            "prompt_tokens": t.tokens,
            "method": t.method,
            "exact": t.exact,
            "source": t.source,
            "cjk_chars": _jnum(t.cjk_chars),
            "other_chars": _jnum(t.other_chars),
            "chars_per_token": _jnum(t.chars_per_token),
            "files_counted": _jnum(t.files_counted),
            "files_skipped": _jnum(t.files_skipped),
            "skipped": dict(t.skipped),
            "note": t.note or None,
        },
        "concurrency": b.concurrency,
        "concurrency_origin": b.concurrency_origin.value,
        "output_tokens": {"value": b.output_tokens, "origin": b.output_origin.value},
        "ceiling": {
            "max_model_len": _jfig(b.ceiling.max_model_len),
            "live_tokens_per_request": _jfig(b.ceiling.live_tokens_per_request),
            "over_by_tokens": _jfig(b.ceiling.over_by_tokens),
            "max_prompt_tokens": _jfig(b.ceiling.max_prompt_tokens),
            "rejected": b.ceiling.rejected,
            "verdict": b.ceiling.verdict.value,
            "served_output_tokens": b.ceiling.served_output_tokens,
            "why": b.ceiling.why or None,
            "advice": b.ceiling.advice or None,
            "rule": b.ceiling.rule or None,
        },
        "kv": {
            "pool_tokens": _jfig(b.kv.pool_tokens),
            "total_tokens": _jfig(b.kv.total_tokens),
            "pool_used_pct": _jfig(b.kv.pool_used_pct),
            "fits": b.kv.fits,
            "max_concurrency_by_pool": _jfig(b.kv.max_concurrency_by_pool),
            "max_num_seqs": _jfig(b.kv.max_num_seqs),
            "free_tokens_now": _jfig(b.kv.free_tokens_now),
            "free_used_pct": _jfig(b.kv.free_used_pct),
            "fits_now": b.kv.fits_now,
        },
        "batched": {
            "max_num_batched_tokens": _jfig(b.batched.max_num_batched_tokens),
            "batched_tokens": _jfig(b.batched.batched_tokens),
            "prefill_chunks": _jfig(b.batched.prefill_chunks),
            "over_limit": b.batched.over_limit,
            "max_concurrency_in_one_batch": _jfig(b.batched.max_concurrency_in_one_batch),
        },
        "time": {
            "ttft_s": _jest(b.timing.ttft_s),
            "prefill_tps": _jest(b.timing.prefill_tps),
            "decode_tps": _jest(b.timing.decode_tps),
            "aggregate_tps": _jest(b.timing.aggregate_tps),
            "aggregate_kind": b.timing.aggregate_kind,
            "total_s": _jfig(b.timing.total_s),
        },
        "send_now": _send_now(b),
        "lesson": _lesson(b),
        "warnings": list(b.warnings),
        "not_accounted_for": list(b.not_accounted_for),
    }


def _val(value: object) -> dict[str, Any]:
    number = _jnum(value)
    return {"value": number, "reason": None if number is not None else _why(value)}


def _send_now(b: Budget) -> dict[str, Any]:
    n = b.send_now
    return {
        "live": n.live,
        "running": _val(n.running),
        "waiting": _val(n.waiting),
        "concurrency": _val(n.concurrency),
        "prefill_concurrency": {**_val(n.prefill_concurrency), "how": n.prefill_how or None},
        "queued_because": n.queued_because or None,
        "queue_wait_s": {**_val(n.queue_wait_s), "origin": n.wait_origin or None},
        "ttft_s": _jest(n.ttft_s) if n.ttft_s is not None else None,
        "ttft_total_s": _val(n.ttft_total_s),
        "idle_ttft_s": _jest(n.idle_ttft_s),
        "refused": n.refused or None,
    }


def _lesson(b: Budget) -> dict[str, Any]:
    x = b.lesson
    return {
        "prompt_tokens": x.prompt_tokens,
        "shortest_prompt_tokens": x.shortest_prompt_tokens,
        "concurrency": x.concurrency,
        "decode_keep_pct": _val(x.decode_keep_pct),
        "e2e_keep_pct": {**_val(x.e2e_keep_pct), "how": x.e2e_how},
        "ttft_growth_x": _val(x.ttft_growth),
    }
