"""Sweep profiles: what one serving setup measured, keyed by (prompt tokens, concurrency).

A profile is a benchmark sweep plus the serving limits it ran under (DESIGN.md §6). This
module is the data model; :mod:`sparktop.sweep.profiles.loader` finds and loads profiles
(built-in, user profile directory, file path), :mod:`sparktop.sweep.profiles.profile_file`
parses the file format documented in ``sparktop/sweep/README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktop.values import NA, Num

DEFAULT_PROFILE = "4x-spark-dsv41-flash-1017"
"""The profile used when neither the command line nor the inventory names one."""

AGGREGATE_KINDS = ("end-to-end", "decode-only")
"""What ``aggregate_tps`` means: output tokens over the whole request including prefill
(``end-to-end``), or over the decode phase only (``decode-only``)."""

_NOT_IN_PROFILE = NA("not in profile")
_NOT_PUBLISHED = NA("not published")


@dataclass(frozen=True, slots=True)
class ProfileRow:
    """One measured cell of a sweep: ``concurrency`` requests of ``prompt_tokens`` each.

    ``ttft_s`` is time to first token (s); ``prefill_tps`` and ``decode_tps`` are per request
    (tok/s); ``aggregate_tps`` is the whole batch's output rate (tok/s), end-to-end or
    decode-only as the profile's ``aggregate_kind`` says. ``context`` is the sweep's nominal
    label (``"128K"``) when it has one; ``line`` is the row's line in the profile file.
    ``aggregate_e2e_tps`` is the end-to-end aggregate next to a decode-only ``aggregate_tps``
    (``sparktop sweep`` writes both); ``observations`` and the ``*_p25``/``*_p75`` quartiles
    (TTFT s, decode tok/s) say how many requests a cell rests on and how far they spread.
    """

    prompt_tokens: int
    concurrency: int
    ttft_s: float
    prefill_tps: float
    decode_tps: float
    aggregate_tps: float
    context: str = ""
    context_tokens: int | NA = _NOT_IN_PROFILE
    aggregate_prefill_tps: Num = _NOT_IN_PROFILE
    wall_s: Num = _NOT_IN_PROFILE
    aggregate_e2e_tps: Num = _NOT_IN_PROFILE
    observations: int | NA = _NOT_IN_PROFILE
    ttft_p25_s: Num = _NOT_IN_PROFILE
    ttft_p75_s: Num = _NOT_IN_PROFILE
    decode_p25_tps: Num = _NOT_IN_PROFILE
    decode_p75_tps: Num = _NOT_IN_PROFILE
    line: int = 0


@dataclass(frozen=True, slots=True)
class AcceptancePoint:
    """A single measurement outside the sweep grid (e.g. the 899,994-token single stream).

    The estimator interpolates towards it beyond the table's longest prompt, for the figures
    it publishes; the others stay NA with the reason.
    """

    prompt_tokens: int
    concurrency: int
    ttft_s: float
    prefill_tps: Num = _NOT_PUBLISHED
    decode_tps: Num = _NOT_PUBLISHED
    aggregate_tps: Num = _NOT_PUBLISHED
    note: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class Profile:
    """A validated sweep profile (immutable; safe to share between threads and caches).

    Limits are token counts (``int``) or NA when the profile does not state them.
    ``baseline_sm_clock_mhz`` holds one clock per node measured during the sweep;
    ``baseline_temperature_c`` the temperatures as published (per node, or a low–high range).
    ``columns`` pairs each column name with its meaning as the file declares it;
    ``derived_columns`` names the columns computed by whoever wrote the file from other
    columns rather than measured (comparisons leave them out). ``origin``
    is ``"built-in"`` or the file path.
    """

    name: str
    source: str
    aggregate_kind: str
    rows: tuple[ProfileRow, ...]
    columns: tuple[tuple[str, str], ...] = ()
    derived_columns: tuple[str, ...] = ()
    acceptance: tuple[AcceptancePoint, ...] = ()
    cluster: str = ""
    model: str = ""
    engine: str = ""
    nodes: int | NA = _NOT_IN_PROFILE
    kv_pool_tokens: int | NA = _NOT_IN_PROFILE
    max_model_len: int | NA = _NOT_IN_PROFILE
    max_num_seqs: int | NA = _NOT_IN_PROFILE
    max_num_batched_tokens: int | NA = _NOT_IN_PROFILE
    output_tokens: int | NA = _NOT_IN_PROFILE
    baseline_sm_clock_mhz: tuple[float, ...] = ()
    baseline_temperature_c: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()
    origin: str = "built-in"

    @property
    def concurrencies(self) -> tuple[int, ...]:
        """The measured concurrency columns, ascending."""
        return tuple(sorted({r.concurrency for r in self.rows}))

    def column(self, concurrency: int) -> tuple[ProfileRow, ...]:
        """The rows measured at ``concurrency``, by ascending prompt length (empty if none)."""
        return tuple(
            sorted(
                (r for r in self.rows if r.concurrency == concurrency),
                key=lambda r: r.prompt_tokens,
            )
        )

    def meaning(self, column: str) -> str:
        """What the file says a column means ("" when it does not say)."""
        return dict(self.columns).get(column, "")
