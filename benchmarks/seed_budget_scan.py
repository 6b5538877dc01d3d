#!/usr/bin/env python3
"""The seed's budget script (``ctx_budget_2spark.py`` in /work/shared/seeds/000_*.txt) on
its ``--scan-dir`` path, the reference ``bench_budget`` runs as a command: its imports
(argparse, json, os, sys), command line, directory walk and per-character CJK count,
re-indented as printed in the seed (type annotations added). Its sweep-table interpolation
and report (microseconds of CPU) are left out: the one number printed is the estimate.

Run: ``python benchmarks/seed_budget_scan.py --scan-dir DIR [--ext .py]``
"""

import argparse
import json
import os
import sys

SKIP_DIRS = {'.git', 'node_modules', '__pycache__', '.venv', 'venv', 'dist',
             'build', '.next', 'target', '.idea', '.mypy_cache'}  # fmt: skip


def is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (0x3400 <= o <= 0x9FFF) or (0xF900 <= o <= 0xFAFF) or (0x3000 <= o <= 0x303F)


def est_tokens(text: str, chars_per_token: float = 4.0) -> tuple[int, int, int]:
    cjk = sum(1 for c in text if is_cjk(c))
    other = len(text) - cjk
    return int(cjk + other / chars_per_token), cjk, other


def scan_dir(
    root: str, exts: list[str], chars_per_token: float, max_mb: int = 200
) -> dict[str, int]:
    total = cjk_all = other_all = 0
    files = skipped = 0
    budget = max_mb * 1024 * 1024
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for fn in filenames:
            if exts and not any(fn.endswith(e) for e in exts):
                continue
            p = os.path.join(dirpath, fn)
            try:
                if os.path.getsize(p) > budget:
                    skipped += 1
                    continue
                with open(p, encoding="utf-8", errors="strict") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError):
                skipped += 1
                continue
            t, c, o = est_tokens(text, chars_per_token)
            total += t
            cjk_all += c
            other_all += o
            files += 1
    return {'tokens': total, 'files': files, 'skipped': skipped,
            'cjk_chars': cjk_all, 'other_chars': other_all}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scan-dir", required=True)
    ap.add_argument("--ext", default="")
    ap.add_argument("--chars-per-token", type=float, default=4.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    exts = [e.strip() for e in a.ext.split(",") if e.strip()]
    scan = scan_dir(a.scan_dir, exts, a.chars_per_token)
    print(json.dumps(scan) if a.json else scan["tokens"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
