"""What a server does with a request over ``max_model_len``, by server version.

vLLM's OpenAI server checks a request's length in two places: the renderer
(``vllm/renderers/params.py``, ``TokenizeParams``: ``_token_len_check`` and
``__post_init__``) and the entrypoint (``get_max_tokens`` in
``vllm/entrypoints/serve/utils/api_utils.py``). Read from the released wheels:

- **vLLM ≥ 0.32** (``TokenizeParams.max_input_tokens`` is ``max_model_len`` itself): a prompt
  + ``max_tokens`` over ``max_model_len`` is *accepted* and the output is shortened to
  ``max_model_len − prompt`` tokens (``finish_reason: length``). Refused (HTTP 400): a
  prompt that alone exceeds the limit ("… your prompt contains N input tokens, which exceeds
  this limit even without any output tokens"), a prompt that fills it exactly (no room for
  one output token: "max_tokens must be at least 1, got 0"), and ``max_tokens`` itself over
  ``max_model_len`` ("max_tokens=N cannot be greater than max_model_len=L").
- **vLLM < 0.32** (0.31, 0.29, 0.26 checked; ``max_input_tokens = max_model_len −
  max_tokens``, and the older ``_validate_input``/``_validate_prompt_and_tokenize`` of
  ``serving_engine.py`` the same way): prompt + ``max_tokens`` over ``max_model_len`` is
  *refused* with HTTP 400 ("… you requested 2048 output tokens and your prompt contains
  985 input tokens, for a total of 3033 tokens"; before the renderer: "… you requested 3033
  tokens (985 in the messages, 2048 in the completion)").

The real vLLM 0.32.0 run of ``shared/fixtures/real/SOURCES.md`` shows the first: a 985-token
prompt with ``max_tokens`` 2048 on ``max_model_len`` 2048 returned 200 with 1,063 completion
tokens, ``finish_reason: length``.

A server whose version is unknown (no ``/version``: no live server, SGLang, llama.cpp) gets
both answers: refused by vLLM < 0.32, shortened by vLLM ≥ 0.32.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from sparktop.sources.engines.kinds import KINDS


class Verdict(enum.StrEnum):
    """What the server does with one request of this prompt and output."""

    FITS = "fits"
    SHORTENED = "shortened"
    """Accepted; the output stops at ``max_model_len − prompt`` tokens (finish_reason length)."""
    REJECTED = "rejected"
    DEPENDS = "rejected or shortened"
    """Over the limit by the output; the server's version decides (unknown here)."""
    UNKNOWN = "unknown"
    """``max_model_len`` unknown."""


@dataclass(frozen=True, slots=True)
class Rule:
    """How the live server treats prompt + output over ``max_model_len``.

    ``shortens``: True (vLLM ≥ 0.32), False (older vLLM) or None (version unknown);
    ``server``: the server it is for (``vLLM 0.32.0``), or why it is unknown."""

    shortens: bool | None
    server: str


def _release(version: str) -> tuple[int, int] | None:
    found = re.match(r"\s*v?(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else None


def rule_for(kind: str, version: str) -> Rule:
    """The rule for a server of ``kind`` (``vllm``, ``sglang``…) at ``version`` (its
    ``/version`` answer, "" unknown): the release its kind declares it shortens from
    (:attr:`~sparktop.sources.engines.kinds.KindSpec.shortens_from`; only vLLM's is known).
    A kind without one, or a server without a version, gets ``shortens=None``."""
    spec = KINDS.get(kind)
    if spec is None or spec.shortens_from is None:
        return Rule(None, f"{kind or 'a server'} (its rule is not known here)")
    release = _release(version)
    if release is None:
        return Rule(None, f"{spec.label}, version unknown (no /version answer)")
    return Rule(release >= spec.shortens_from, f"{spec.label} {version}")


UNKNOWN_RULE = Rule(None, "unknown (no live server: pass --endpoint)")
"""The rule without a live server: both answers are given."""


def verdict(prompt: int, output: int, limit: int, rule: Rule) -> Verdict:
    """The verdict for ``prompt`` + ``output`` tokens on ``limit`` (``max_model_len``)."""
    if prompt + output <= limit:
        return Verdict.FITS
    if prompt >= limit or output > limit:
        return Verdict.REJECTED  # on every version (module doc)
    if rule.shortens is None:
        return Verdict.DEPENDS
    return Verdict.SHORTENED if rule.shortens else Verdict.REJECTED


def advice(prompt: int, output: int, limit: int) -> str:
    """What to lower so the request fits whole: ``lower the output to ≤ 1,063 tokens`` when
    the output alone reaches the limit (no prompt cut can fit it), else that or the prompt
    cut; the prompt cut when the prompt alone fills the limit. "" when it fits."""
    over = prompt + output - limit
    if over <= 0:
        return ""
    room = limit - prompt  # the most output this prompt leaves
    if room < 1:
        if output >= limit:
            return (
                f"the prompt alone fills max_model_len and so does the output: cut the prompt "
                f"below {limit:,} tokens and lower the output to what it leaves"
            )
        return (
            f"the prompt alone fills max_model_len: cut it by at least {over:,} tokens "
            f"(prompt ≤ {limit - output:,} with this output)"
        )
    lower = f"lower the output to ≤ {room:,} tokens"
    if output >= limit:
        return lower
    return f"{lower}, or cut the prompt by at least {over:,} tokens (prompt ≤ {limit - output:,})"
