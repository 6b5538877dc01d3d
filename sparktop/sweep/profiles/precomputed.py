"""The built-in profiles precomputed: each one's validated form and its fit, as JSON.

``sparktop budget`` with the default profile used to spend most of its CPU on work that is
the same on every run: PyYAML's composer (keeping line numbers for errors a built-in file
never has), the pydantic models that check it, and the estimator's leave-one-out fit (37
surfaces). ``tools/gen_precomputed.py`` writes ``sparktop/sweep/profiles/<name>.json`` next
to each built-in ``<name>.yaml``: the SHA-256 of the YAML text it was made from, the
:class:`~sparktop.sweep.profiles.profile.Profile` field by field (``NA`` as ``{"na": reason}``) and
the fit's chosen designs and held-out errors (floats round-trip exactly through JSON).

A JSON whose hash does not match its YAML (or that is missing or unreadable) is ignored and
the YAML is parsed and fitted as before; ``tests/test_precomputed.py`` checks that each JSON
equals a fresh parse and fit.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sparktop.sweep.profiles.profile import AcceptancePoint, Profile, ProfileRow
from sparktop.values import NA

FORMAT = "sparktop.precomputed/1"

Designs = dict[str, tuple[float | None, float | None]]
"""Per primary metric: the chosen design's (shrink, edge), as
:class:`~sparktop.sweep.estimator.surface.Design` takes them."""
Errors = tuple[tuple[str, tuple[tuple[float, float, float], ...]], ...]
"""Per metric: (log2 prompt, log2 concurrency, held-out log error) of every cell."""

_FITS: dict[Profile, tuple[Designs, Errors]] = {}


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _encode(value: object) -> object:
    if isinstance(value, NA):
        return {"na": value.reason}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(value: object) -> Any:
    if isinstance(value, dict):
        return NA(value["na"])
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def _fields(obj: object) -> dict[str, object]:
    return {name: _encode(getattr(obj, name)) for name in type(obj).__dataclass_fields__}  # type: ignore[attr-defined]


def dump(profile: Profile, yaml_text: str, designs: Designs, errors: Errors) -> str:
    """The JSON for ``profile`` (parsed from ``yaml_text``) and its fit."""
    doc = {
        "format": FORMAT,
        "yaml_sha256": text_hash(yaml_text),
        "profile": {
            **_fields(profile),
            "rows": [_fields(r) for r in profile.rows],
            "acceptance": [_fields(a) for a in profile.acceptance],
        },
        "designs": {m: list(d) for m, d in designs.items()},
        "errors": [[m, [list(e) for e in found]] for m, found in errors],
    }
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def load(json_text: str, yaml_text: str) -> Profile | None:
    """The profile from ``json_text`` (its fit registered for :func:`fit_for`), or None when
    the JSON was not made from ``yaml_text`` or is not this format."""
    try:
        doc = json.loads(json_text)
        if doc.get("format") != FORMAT or doc.get("yaml_sha256") != text_hash(yaml_text):
            return None
        fields = dict(doc["profile"])
        rows = tuple(ProfileRow(**{k: _decode(v) for k, v in r.items()}) for r in fields["rows"])
        acceptance = tuple(
            AcceptancePoint(**{k: _decode(v) for k, v in a.items()}) for a in fields["acceptance"]
        )
        fields = {k: _decode(v) for k, v in fields.items() if k not in ("rows", "acceptance")}
        profile = Profile(**fields, rows=rows, acceptance=acceptance)
        designs: Designs = {m: (d[0], d[1]) for m, d in doc["designs"].items()}
        errors: Errors = tuple(
            (m, tuple((e[0], e[1], e[2]) for e in found)) for m, found in doc["errors"]
        )
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
    _FITS[profile] = (designs, errors)
    return profile


def fit_for(profile: Profile) -> tuple[Designs, Errors] | None:
    """The precomputed fit of a built-in ``profile`` loaded through :func:`load` (None for
    any other profile, an edited copy of a built-in included: profiles compare by value)."""
    return _FITS.get(profile)
