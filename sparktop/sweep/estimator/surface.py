"""The surface behind the estimator: fitted physical models tied to the measured cells.

A sweep measures a few cells of a surface over (prompt length ``p``, concurrency ``c``).
:class:`Surface` predicts the surface anywhere from all of them:

- **models** fitted over the whole table (prompt and concurrency together):
  TTFT ≈ t₀ + t₁·c + (a·p + b·p²)·(1, c) + h·max(0, c·p − max_num_batched_tokens) — a fixed
  overhead, a per-request overhead, linear and quadratic (attention) prefill cost for one
  request and for the batch, and the chunking step once the batch's prompts no longer fit one
  scheduler step; per-stream decode time per token ≈ d₀ + d₁·c + e·p + g·(c − 1)·p — the
  weights read once per step, per-sequence work, the stream's own KV read, and the other
  streams' prompts (their prefill chunks and KV) sharing each step.
  Non-negative least squares on relative error (every term is a cost, none a credit);
- prefill is prompt ÷ TTFT times the cells' own ratio (their prefill is a mean of per-request
  rates, not exactly prompt ÷ mean TTFT); aggregate is the batch rate built from TTFT and
  decode (``c × decode`` for a decode-only column, ``c·N / (TTFT + N / decode)`` for an
  end-to-end one, ``N`` the output tokens, fitted when the profile does not state them) times
  the cells' own ratio;
- the **residual field** (measured ÷ model, in logs) is interpolated between the cells of one
  concurrency, so the estimate passes through every cell and follows the model's shape between
  them; between two cells of one concurrency at most :data:`DENSE_RATIO` apart in prompt the
  figures are plain log-log interpolation (the seed script's method, which the published
  figures came from); past a concurrency's shortest or longest cell the nearest cell is carried
  along the model's trend by a weight the estimator chooses by leave-one-out.

Pure and deterministic. Inputs come from a validated
:class:`~sparktop.sweep.profiles.profile.Profile`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from sparktop.sweep.estimator.fitmath import minimize_bounded, nnls

METRICS = ("ttft_s", "prefill_tps", "decode_tps", "aggregate_tps")
PRIMARY = ("ttft_s", "decode_tps")
DENSE_RATIO = 4.0
"""Two cells of one concurrency at most this far apart in prompt are interpolated log-log.
Leave-one-out on the 4-Spark table, TTFT median / max %: 1× (never) 3.9 / 14.7, 4× 3.6 / 10.2,
8× 4.8 / 22.9; 4× is also the gap the seed's published 125,272-token figures came from."""
EXTRAPOLATION_LIMIT = 2.0
"""How far past the table's prompt range (either side) an estimate is still given."""


@dataclass(frozen=True, slots=True)
class Point:
    """One measured cell: figures by metric name (an acceptance point may lack some)."""

    prompt: float
    concurrency: int
    values: tuple[tuple[str, float], ...]
    label: str = "row"

    def get(self, metric: str) -> float | None:
        for name, value in self.values:
            if name == metric:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Design:
    """How the residual field is read where cells are sparse (chosen by leave-one-out).

    ``shrink``: in a gap between two cells of one concurrency the residual is interpolated
    between them and shrunk towards the model by this share at the gap's middle (0: the
    residuals throughout, 1: the model alone at the middle; always the cells at the ends);
    ``None``: plain log-log between the two cells, as in a dense gap.
    ``edge``: past a concurrency's outermost cell, the weight on the model's trend from that
    cell (0 holds the cell's value, 1 follows the model), or ``None``: the cell's residual
    halves per doubling of distance (the model takes over). Every design passes through the
    cells and is continuous.
    """

    shrink: float | None = 0.0
    edge: float | None = 1.0


DESIGNS_SHRINK: tuple[float | None, ...] = (0.0, 0.5, 1.0, None)
"""``None``: no model in the gap at all, plain log-log between the two cells."""
DESIGNS_EDGE: tuple[float | None, ...] = (0.0, 0.5, 1.0, None)


@dataclass(frozen=True, slots=True)
class Part:
    """An estimate in logs: ``ln_value``, ``basis`` (exact / interpolated / fitted /
    extrapolated) and ``outside`` (how far past the table's prompt range, in log₂)."""

    ln_value: float
    basis: str
    outside: float = 0.0
    note: str = ""
    exact: float | None = None
    """The measured figure itself at a cell (``ln_value`` is its log)."""


@dataclass(frozen=True, slots=True)
class Missing:
    """No estimate, and why."""

    reason: str


Result = Part | Missing
_RANK = {"exact": 0, "interpolated": 1, "fitted": 2, "extrapolated": 3}


def _tok(n: float) -> str:
    return f"{n:,.0f}"


def _tokens(n: float) -> str:
    """``1 token``, ``2 tokens``: a prompt length with its noun agreeing."""
    return f"{_tok(n)} token{'' if _tok(n) == '1' else 's'}"


def _ttft_features(p: float, c: float, batch: float | None) -> list[float]:
    k = p / 1000.0
    row = [1.0, c, k, c * k, k * k, c * k * k]
    if batch is not None:
        row.append(max(0.0, c * p - batch) / 1000.0)
    return row


def _decode_features(p: float, c: float) -> list[float]:
    k = p / 1000.0
    return [1.0, c, k, (c - 1.0) * k]


def _nnls_relative(rows: list[list[float]], targets: list[float]) -> tuple[float, ...]:
    """Non-negative coefficients minimising the relative error of ``rows · θ`` to targets
    (each column scaled to its largest magnitude first, so the solve is well conditioned)."""
    if not rows:
        return ()
    x = [[v / y for v in row] for row, y in zip(rows, targets, strict=True)]
    scale = [max(abs(row[j]) for row in x) or 1.0 for j in range(len(x[0]))]
    theta = nnls([[v / s for v, s in zip(row, scale, strict=True)] for row in x], [1.0] * len(x))
    return tuple(t / s for t, s in zip(theta, scale, strict=True))


def _dot(a: list[float], b: tuple[float, ...]) -> float:
    return math.fsum(u * v for u, v in zip(a, b, strict=False))


class Surface:
    """Fitted models over ``points`` plus the residual field; see the module docstring.

    ``batch`` is ``max_num_batched_tokens`` (None: no chunking term); ``output_tokens`` the
    sweep's output tokens per request (None: fitted from an end-to-end aggregate);
    ``aggregate_kind`` ``"end-to-end"`` or ``"decode-only"``; ``max_model_len`` bounds prompts
    (None: unbounded). ``designs`` maps each primary metric to its :class:`Design`.
    """

    def __init__(
        self,
        points: Iterable[Point],
        *,
        batch: float | None,
        output_tokens: float | None,
        aggregate_kind: str,
        max_model_len: float | None,
        designs: dict[str, Design] | None = None,
    ) -> None:
        self.points = tuple(points)
        self.batch = batch
        self.kind = aggregate_kind
        self.max_model_len = max_model_len
        self.designs = designs or {}
        self._cols: dict[tuple[str, int], list[Point]] = {}
        for pt in sorted(self.points, key=lambda q: q.prompt):
            for name, _ in pt.values:
                self._cols.setdefault((name, pt.concurrency), []).append(pt)
        self._range: dict[str, tuple[float, float]] = {}
        for (name, _), col in self._cols.items():
            lo, hi = self._range.get(name, (col[0].prompt, col[-1].prompt))
            self._range[name] = (min(lo, col[0].prompt), max(hi, col[-1].prompt))
        ttft = [q for q in self.points if q.get("ttft_s")]
        dec = [q for q in self.points if q.get("decode_tps")]
        self._ttft_theta = _nnls_relative(
            [_ttft_features(q.prompt, q.concurrency, batch) for q in ttft],
            [q.get("ttft_s") or 1.0 for q in ttft],
        )
        self._dec_theta = _nnls_relative(
            [_decode_features(q.prompt, q.concurrency) for q in dec],
            [1.0 / (q.get("decode_tps") or 1.0) for q in dec],
        )
        self.output_tokens = output_tokens or self._fit_output_tokens()

    def with_designs(self, designs: dict[str, Design]) -> Surface:
        """The same fit read with other designs (no refit)."""
        other = object.__new__(Surface)
        for name in (
            "points",
            "batch",
            "kind",
            "max_model_len",
            "_cols",
            "_range",
            "output_tokens",
        ):
            setattr(other, name, getattr(self, name))
        other._ttft_theta, other._dec_theta = self._ttft_theta, self._dec_theta
        other.designs = designs
        return other

    # -- the models ----------------------------------------------------------------------------

    def _model_primary(self, metric: str, p: float, c: float) -> float:
        if metric == "ttft_s":
            value = _dot(_ttft_features(p, c, self.batch), self._ttft_theta)
        else:
            per_token = _dot(_decode_features(p, c), self._dec_theta)
            value = 1.0 / per_token if per_token > 0 else math.inf
        return value if value > 0 and math.isfinite(value) else 1e-9

    def _batch_rate(self, c: float, ttft: float, decode: float) -> float:
        if self.kind == "decode-only":
            return c * decode
        n = self.output_tokens
        return c * n / (ttft + n / decode)

    def _fit_output_tokens(self) -> float:
        cells = [
            (q.concurrency, q.get("ttft_s"), q.get("decode_tps"), q.get("aggregate_tps"))
            for q in self.points
        ]
        usable = [(c, t, d, a) for c, t, d, a in cells if t and d and a]
        if self.kind == "decode-only" or not usable:
            return 1.0

        def loss(ln_n: float) -> float:
            n = math.exp(ln_n)
            return sum(math.log(a * (t + n / d) / (c * n)) ** 2 for c, t, d, a in usable)

        return math.exp(minimize_bounded(loss, math.log(8), math.log(1 << 20)))

    def model_ln(self, metric: str, p: float, c: int, at_cell: Point | None = None) -> Result:
        """ln of the model at (p, c); derived metrics use the cell's own figures at a cell,
        else the estimated TTFT / decode there."""
        if metric in PRIMARY:
            return Part(math.log(self._model_primary(metric, p, c)), "fitted")
        need = ("ttft_s",) if metric == "prefill_tps" else ("ttft_s", "decode_tps")
        got: dict[str, float] = {}
        for name in need:
            cell = at_cell.get(name) if at_cell is not None else None
            if cell is not None:
                got[name] = cell
                continue
            part = self.estimate(name, p, c)
            if isinstance(part, Missing):
                return part
            got[name] = math.exp(part.ln_value)
        if metric == "prefill_tps":
            return Part(math.log(p / got["ttft_s"]), "fitted")
        return Part(math.log(self._batch_rate(c, got["ttft_s"], got["decode_tps"])), "fitted")

    def _residual(self, metric: str, pt: Point) -> float | None:
        model = self.model_ln(metric, pt.prompt, pt.concurrency, pt)
        value = pt.get(metric)
        if isinstance(model, Missing) or value is None:
            return None
        return math.log(value) - model.ln_value

    # -- reading the table ---------------------------------------------------------------------

    def columns(self, metric: str) -> list[int]:
        """Concurrencies with at least one cell measuring ``metric``, ascending."""
        return sorted(c for m, c in self._cols if m == metric)

    def prompt_range(self, metric: str) -> tuple[float, float]:
        """Shortest and longest prompt of the cells measuring ``metric`` (all concurrencies)."""
        return self._range.get(metric, (math.inf, -math.inf))

    def column(self, metric: str, c: int) -> list[Point]:
        """The cells of concurrency ``c`` measuring ``metric``, by prompt."""
        return self._cols.get((metric, c), [])

    def _outside(self, metric: str, p: float) -> float | Missing:
        if metric not in self._range:
            return Missing(f"the profile has no cell measuring {metric}")
        lo, hi = self.prompt_range(metric)
        if self.max_model_len is not None and p > self.max_model_len:
            return Missing(
                f"{_tokens(p)} is past max_model_len ({_tok(self.max_model_len)}); the "
                "server rejects it"
            )
        if p > hi * EXTRAPOLATION_LIMIT:
            return Missing(
                f"{_tokens(p)} is more than {EXTRAPOLATION_LIMIT:g}× the longest prompt "
                f"measured for {metric} ({_tok(hi)}); no extrapolation that far"
            )
        if p < lo / EXTRAPOLATION_LIMIT:
            return Missing(
                f"{_tokens(p)} is less than 1/{EXTRAPOLATION_LIMIT:g} of the shortest prompt "
                f"measured for {metric} ({_tok(lo)}); no extrapolation that far"
            )
        return math.log2(p / hi) if p > hi else math.log2(lo / p) if p < lo else 0.0

    def estimate(self, metric: str, p: float, c: int) -> Result:
        """The estimate of ``metric`` at ``p`` prompt tokens × ``c`` requests, in logs."""
        outside = self._outside(metric, p)
        if isinstance(outside, Missing):
            return outside
        cols = self.columns(metric)
        if c in cols:
            return self._in_column(metric, p, c, outside)
        if not cols or c < cols[0] or c > cols[-1]:
            listed = ", ".join(f"{x:,}" for x in cols)
            return Missing(
                f"concurrency {c:,} is outside the measured columns ({listed}); no extrapolation"
            )
        lo = max(x for x in cols if x < c)
        hi = min(x for x in cols if x > c)
        a, b = self._in_column(metric, p, lo, outside), self._in_column(metric, p, hi, outside)
        for side, part in ((lo, a), (hi, b)):
            if isinstance(part, Missing):
                return Missing(f"concurrency {c} lies between {lo} and {hi}; at {side}: "
                               f"{part.reason}")  # fmt: skip
        assert isinstance(a, Part) and isinstance(b, Part)
        f = (math.log(c) - math.log(lo)) / (math.log(hi) - math.log(lo))
        basis = max(a.basis, b.basis, key=_RANK.__getitem__)
        where = f"between concurrency {lo} and {hi} at {_tokens(p)}"
        if _RANK[basis] <= _RANK["interpolated"]:
            ln_value = a.ln_value + f * (b.ln_value - a.ln_value)
            return Part(ln_value, "interpolated", outside, f"interpolated log-log {where}")
        here = self.model_ln(metric, p, c)
        m_lo, m_hi = self.model_ln(metric, p, lo), self.model_ln(metric, p, hi)
        for part in (here, m_lo, m_hi):
            if isinstance(part, Missing):
                return part
        assert isinstance(here, Part) and isinstance(m_lo, Part) and isinstance(m_hi, Part)
        r_lo, r_hi = a.ln_value - m_lo.ln_value, b.ln_value - m_hi.ln_value
        note = f"{basis} {where} ({lo}: {a.note}; {hi}: {b.note})"
        return Part(here.ln_value + r_lo + f * (r_hi - r_lo), basis, outside, note)

    def _in_column(self, metric: str, p: float, c: int, outside: float) -> Result:
        col = self._cols.get((metric, c), [])
        below = [q for q in col if q.prompt < p]
        above = [q for q in col if q.prompt > p]
        for q in col:
            if q.prompt == p:
                what = "row" if q.label == "row" else f": {q.label}"
                note = f"exact{' ' if q.label == 'row' else ''}{what} ({_tokens(p)} × {c})"
                value = q.get(metric) or 1.0
                return Part(math.log(value), "exact", 0.0, note, value)
        lo, hi = (below[-1] if below else None), (above[0] if above else None)
        if lo is not None and hi is not None:
            f = (math.log(p) - math.log(lo.prompt)) / (math.log(hi.prompt) - math.log(lo.prompt))
            y_lo, y_hi = math.log(lo.get(metric) or 1.0), math.log(hi.get(metric) or 1.0)
            rows = f"rows {_tok(lo.prompt)} and {_tok(hi.prompt)} (concurrency {c})"
            shrink = self.designs.get(metric, Design()).shrink if metric in PRIMARY else 0.0
            if hi.prompt / lo.prompt <= DENSE_RATIO or shrink is None:
                return Part(y_lo + f * (y_hi - y_lo), "interpolated", 0.0,
                            f"interpolated log-log between {rows}")  # fmt: skip
            here = self.model_ln(metric, p, c)
            if isinstance(here, Missing):
                return here
            r_lo, r_hi = self._residual(metric, lo), self._residual(metric, hi)
            if r_lo is None or r_hi is None:
                return Missing(f"no model for {metric} at the neighbouring cells")
            keep = 1.0 - shrink * 4.0 * f * (1.0 - f)
            note = f"fitted: the table's model through {rows}"
            return Part(here.ln_value + keep * (r_lo + f * (r_hi - r_lo)), "fitted", 0.0, note)
        edge = lo or hi
        assert edge is not None
        basis = "extrapolated" if outside > 0 else "fitted"
        design = self.designs.get(metric, Design())
        weight = design.edge if metric in PRIMARY else 1.0
        here = self.model_ln(metric, p, c)
        if isinstance(here, Missing):
            return here
        lo_p, hi_p = self.prompt_range(metric)
        if outside > 0:
            side, ref = ("past the longest", hi_p) if p > hi_p else ("below the shortest", lo_p)
            ratio = p / hi_p if p > hi_p else lo_p / p
            note = f"extrapolated {ratio:.2g}× {side} prompt measured ({_tok(ref)})"
        else:
            side = "longest" if edge is lo else "shortest"
            note = f"fitted: {side} row at concurrency {c} is {_tok(edge.prompt)}"
        at_edge = self.model_ln(metric, edge.prompt, c, edge)
        if isinstance(at_edge, Missing):
            return at_edge
        trend = here.ln_value - at_edge.ln_value
        if weight is None:
            residual = math.log(edge.get(metric) or 1.0) - at_edge.ln_value
            fade = 2.0 ** -abs(math.log2(p / edge.prompt))
            how = "that row's residual fading into the table's model"
            return Part(here.ln_value + residual * fade, basis, outside, f"{note}; {how}")
        how = "held at that row" if weight == 0 else "from that row along the table's model"
        ln_value = math.log(edge.get(metric) or 1.0) + weight * trend
        return Part(ln_value, basis, outside, f"{note}; {how}")
