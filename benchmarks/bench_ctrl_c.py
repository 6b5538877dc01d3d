"""Ctrl-C at start-up: how long after a ``sparktop`` command starts a SIGINT still prints a
``KeyboardInterrupt`` traceback.

Each round spawns the command (``budget --prompt-tokens 1000``, which runs for about a second
if left alone), sends SIGINT a fixed delay after the spawn (busy-waiting, so the delay is
exact to ~0.1 ms) and sorts the outcome: a clean 130; killed by the signal (the shell's 130,
no output: the interpreter had not yet installed its own handler); or a traceback. The delays
step through ``0 … --max-ms`` and alternate between the two scripts below, so both see the
same load. The traceback window is estimated as Σ P(traceback at d) · step.

- ``scripts/sparktop``: the installed command; its first statement installs the handler;
- ``pip wrapper``: the script pip writes for a ``[project.scripts]`` entry (``import re``,
  ``import sys``, then sparktop), rebuilt here in a temporary folder for comparison.

What is left for ``scripts/sparktop`` is the interpreter's ``site`` start-up (the
environment's ``.pth`` files), which runs before any script and no Python program can
shorten.

Run: ``python benchmarks/bench_ctrl_c.py [--quick] [--max-ms 60] [--step-ms 2]``
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ROOT, Figure, arg_parser, info, machine, print_table

PIP_WRAPPER = """\
import re
import sys
from sparktop.__main__ import run
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(run())
"""
ARGS = ("budget", "--prompt-tokens", "1000")
CLEAN, KILLED, TRACEBACK = "exit 130", "killed by SIGINT", "traceback"
Outcomes = dict[int, collections.Counter[str]]
"""Outcome counts per delay (ms)."""


def outcome(script: Path, delay_s: float, cwd: Path) -> str:
    """Spawn ``python SCRIPT budget …``, SIGINT it ``delay_s`` after the spawn, classify."""
    proc = subprocess.Popen(
        [sys.executable, str(script), *ARGS],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={**os.environ, "TERM": "dumb"},
    )
    start = time.perf_counter()
    while time.perf_counter() - start < delay_s:
        pass
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if b"Traceback" in err or b"KeyboardInterrupt" in err:
        return TRACEBACK
    if proc.returncode == -signal.SIGINT and not err:
        return KILLED
    if proc.returncode == 130 and not err:
        return CLEAN
    return f"exit {proc.returncode} {err[:60]!r}"


def measure(max_ms: int, step_ms: int, rounds: int) -> dict[str, Outcomes]:
    """Outcomes per script name and delay (ms)."""
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "sparktop"
        wrapper.write_text(PIP_WRAPPER, encoding="utf-8")
        scripts = {"scripts/sparktop": ROOT / "scripts" / "sparktop", "pip wrapper": wrapper}
        found: dict[str, Outcomes] = {
            name: collections.defaultdict(collections.Counter) for name in scripts
        }
        for _ in range(rounds):
            for delay_ms in range(0, max_ms + 1, step_ms):
                for name, script in scripts.items():
                    found[name][delay_ms][outcome(script, delay_ms / 1000, Path(tmp))] += 1
    return found


def window_ms(by_delay: Outcomes, step_ms: int) -> float:
    """Σ P(traceback at d) · step: the expected length of the traceback window."""
    return sum(c[TRACEBACK] / sum(c.values()) * step_ms for c in by_delay.values())


def last_ms(by_delay: Outcomes) -> int | None:
    """The longest delay at which a traceback was seen."""
    seen = [d for d, c in by_delay.items() if c[TRACEBACK]]
    return max(seen) if seen else None


def figures(found: dict[str, Outcomes], step_ms: int) -> list[Figure]:
    rows = []
    for name, by_delay in found.items():
        total = collections.Counter[str]()
        for c in by_delay.values():
            total.update(c)
        last = last_ms(by_delay)
        rows.append(
            info(
                f"{name}: traceback window",
                f"{window_ms(by_delay, step_ms):.1f} ms (last seen at "
                f"{'–' if last is None else f'{last} ms'}; "
                + ", ".join(f"{k} {v}" for k, v in sorted(total.items()))
                + ")",
            )
        )
    return rows


def main() -> None:
    parser = arg_parser(__doc__, quick="3 rounds instead of 10")
    parser.add_argument("--max-ms", type=int, default=60, help="longest delay (default 60)")
    parser.add_argument("--step-ms", type=int, default=2, help="delay step (default 2)")
    args = parser.parse_args()
    found = measure(args.max_ms, args.step_ms, 3 if args.quick else 10)
    for name, by_delay in found.items():
        print(name)
        for delay_ms, c in sorted(by_delay.items()):
            print(f"  {delay_ms:4d} ms  " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print_table("Ctrl-C at start-up", figures(found, args.step_ms), machine())


if __name__ == "__main__":
    main()
