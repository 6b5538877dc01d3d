#!/usr/bin/env python3
"""Write each built-in profile's precomputed form (``sparktop/sweep/profiles/<name>.json``):
the profile as parsed from its YAML and the estimator's fit
(:mod:`sparktop.sweep.profiles.precomputed`).

Run it after changing a built-in YAML (``tools/gen_profiles.py``) or the estimator's fit:

    python tools/gen_precomputed.py            # (re)write the JSON files
    python tools/gen_precomputed.py --check    # exit 1 if one is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktop.sweep.estimator.estimator import choose_designs  # noqa: E402
from sparktop.sweep.profiles import precomputed  # noqa: E402
from sparktop.sweep.profiles.builtin import builtin_profile_names  # noqa: E402
from sparktop.sweep.profiles.profile_file import parse_profile  # noqa: E402

FOLDER = REPO / "sparktop" / "sweep" / "profiles"


def render(name: str) -> str:
    """The JSON for built-in ``name``, from a fresh parse of its YAML and a fresh fit."""
    text = (FOLDER / f"{name}.yaml").read_text(encoding="utf-8")
    profile = parse_profile(text, f"built-in:{name}.yaml", "built-in")
    designs, errors = choose_designs(profile)
    plain = {m: (d.shrink, d.edge) for m, d in designs.items()}
    return precomputed.dump(profile, text, plain, errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args()
    stale = []
    for name in builtin_profile_names():
        text, target = render(name), FOLDER / f"{name}.json"
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(str(target.relative_to(REPO)))
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(REPO)}")
    if stale:
        print("out of date (run tools/gen_precomputed.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
