"""The two numerical routines the estimator's fit needs, in plain Python.

The fit is a handful of unknowns over at most a few hundred cells, so NumPy and SciPy (about
60 MB of the monitor's memory and most of its import time) bought nothing here but their
weight. The routines follow the published algorithms; ``tests/test_fitmath.py`` holds both to
``scipy.optimize.nnls`` and ``scipy.optimize.minimize_scalar(method="bounded")`` on the
built-in profiles' fits and on generated problems.

- :func:`nnls`: non-negative least squares, Lawson & Hanson, *Solving Least Squares Problems*
  (1974), ch. 23 (the active-set method SciPy's ``nnls`` also implements), each inner solve a
  Householder QR least-squares solve (no normal equations: they square the condition number).
- :func:`minimize_bounded`: Brent's method for a minimum on an interval (Brent, *Algorithms for
  Minimization without Derivatives*, 1973, ch. 5: golden sections with parabolic steps), the
  method and tolerance convention of SciPy's ``fminbound`` (``xatol`` absolute).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

_EPS = 2.220446049250313e-16


def lstsq(a: Sequence[Sequence[float]], b: Sequence[float]) -> list[float]:
    """Least-squares solution ``x`` minimising ``‖a·x − b‖₂`` by Householder QR.

    ``a`` is m × n with m ≥ n (rows of equal length), ``b`` has m entries. A column that is
    (numerically) dependent on earlier ones gets 0. Raises ``ValueError`` on a shape mismatch.
    """
    m = len(a)
    n = len(a[0]) if m else 0
    if len(b) != m or any(len(row) != n for row in a):
        raise ValueError("lstsq: a must be m x n and b must have m entries")
    r = [list(map(float, row)) for row in a]
    y = [float(v) for v in b]
    norm_a = max((abs(v) for row in r for v in row), default=0.0)
    tol = max(m, n) * _EPS * norm_a
    diag: list[float] = []
    for k in range(min(m, n)):
        alpha = math.sqrt(sum(r[i][k] * r[i][k] for i in range(k, m)))
        if alpha <= tol:
            diag.append(0.0)
            continue
        if r[k][k] > 0:
            alpha = -alpha
        v = [0.0] * m
        v[k] = r[k][k] - alpha
        for i in range(k + 1, m):
            v[i] = r[i][k]
        vv = sum(v[i] * v[i] for i in range(k, m))
        if vv == 0.0:
            diag.append(alpha)
            continue
        for j in range(k, n):
            s = sum(v[i] * r[i][j] for i in range(k, m)) * 2.0 / vv
            if s:
                for i in range(k, m):
                    r[i][j] -= s * v[i]
        s = sum(v[i] * y[i] for i in range(k, m)) * 2.0 / vv
        for i in range(k, m):
            y[i] -= s * v[i]
        diag.append(r[k][k])
    x = [0.0] * n
    for k in range(min(m, n) - 1, -1, -1):
        if abs(diag[k]) <= tol:
            x[k] = 0.0
            continue
        s = y[k] - sum(r[k][j] * x[j] for j in range(k + 1, n))
        x[k] = s / r[k][k]
    return x


def nnls(a: Sequence[Sequence[float]], b: Sequence[float], max_iter: int = 0) -> list[float]:
    """Non-negative least squares: ``x ≥ 0`` minimising ``‖a·x − b‖₂`` (Lawson–Hanson).

    ``a`` is m × n (list of rows), ``b`` has m entries; returns the n coefficients.
    ``max_iter`` bounds the outer iterations (0: 3·n, as SciPy). Raises ``ValueError`` on a
    shape mismatch.
    """
    m = len(a)
    n = len(a[0]) if m else 0
    if len(b) != m or any(len(row) != n for row in a):
        raise ValueError("nnls: a must be m x n and b must have m entries")
    cols = [[float(a[i][j]) for i in range(m)] for j in range(n)]
    bv = [float(v) for v in b]
    x = [0.0] * n
    passive: list[int] = []
    tol = 10.0 * max(m, n) * _EPS * max((abs(v) for col in cols for v in col), default=0.0)
    tol *= max(1.0, math.sqrt(sum(v * v for v in bv)))
    limit = max_iter or 3 * n

    def gradient() -> list[float]:
        resid = [bv[i] - sum(cols[j][i] * x[j] for j in range(n)) for i in range(m)]
        return [sum(cols[j][i] * resid[i] for i in range(m)) for j in range(n)]

    def solve(idx: list[int]) -> list[float]:
        sub = [[cols[j][i] for j in idx] for i in range(m)]
        return lstsq(sub, bv)

    blocked: set[int] = set()
    for _ in range(limit):
        w = gradient()
        active = [j for j in range(n) if j not in passive and j not in blocked]
        if not active:
            break
        j_max = max(active, key=lambda j: w[j])
        if w[j_max] <= tol:
            break
        passive.append(j_max)
        while True:
            z_sub = solve(passive)
            if all(v > 0 for v in z_sub):
                for j in range(n):
                    x[j] = 0.0
                for j, v in zip(passive, z_sub, strict=True):
                    x[j] = v
                break
            steps = [
                x[j] / (x[j] - v)
                for j, v in zip(passive, z_sub, strict=True)
                if v <= 0 and x[j] - v > 0
            ]
            if not steps:
                # Only the column just added went non-positive: numerically it adds nothing
                # (rank-deficient or tiny), so it stays out, as in exact arithmetic it would.
                passive.remove(j_max)
                blocked.add(j_max)
                break
            alpha = min(steps)
            for j, v in zip(passive, z_sub, strict=True):
                x[j] += alpha * (v - x[j])
            floor = 1e-14 * max((abs(v) for v in x), default=0.0)
            passive = [j for j in passive if x[j] > floor]
            for j in range(n):
                if j not in passive:
                    x[j] = 0.0
            if not passive:
                break
    return x


def minimize_bounded(
    f: Callable[[float], float], lo: float, hi: float, xatol: float = 1e-5, max_iter: int = 500
) -> float:
    """The ``x`` in ``[lo, hi]`` at a (local) minimum of ``f``: Brent's method.

    Golden-section steps with parabolic interpolation where it is trusted; stops when the
    bracket is within ``xatol`` (absolute, plus a relative term as in Brent) of the best point.
    Raises ``ValueError`` when ``lo > hi``.
    """
    if lo > hi:
        raise ValueError("minimize_bounded: lo must not exceed hi")
    golden = 0.5 * (3.0 - math.sqrt(5.0))
    sqrt_eps = math.sqrt(_EPS)
    a, b = lo, hi
    v = w = x = a + golden * (b - a)
    fv = fw = fx = f(x)
    d = e = 0.0
    for _ in range(max_iter):
        mid = 0.5 * (a + b)
        tol1 = sqrt_eps * abs(x) + xatol / 3.0
        tol2 = 2.0 * tol1
        if abs(x - mid) <= tol2 - 0.5 * (b - a):
            break
        golden_step = True
        if abs(e) > tol1:
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            r, e = e, d
            if abs(p) < abs(0.5 * q * r) and q * (a - x) < p < q * (b - x):
                d = p / q
                u = x + d
                if (u - a) < tol2 or (b - u) < tol2:
                    d = tol1 if mid >= x else -tol1
                golden_step = False
        if golden_step:
            e = (b - x) if x < mid else (a - x)
            d = golden * e
        u = x + (d if abs(d) >= tol1 else (tol1 if d > 0 else -tol1))
        fu = f(u)
        if fu <= fx:
            if u < x:
                b = x
            else:
                a = x
            v, fv, w, fw, x, fx = w, fw, x, fx, u, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v, fv, w, fw = w, fw, u, fu
            elif fu <= fv or v in (x, w):
                v, fv = u, fu
    return x
