"""The built-in profiles' precomputed JSON (sparktop.sweep.profiles.precomputed) is what a fresh
parse of their YAML and a fresh fit give, and a JSON that does not match its YAML is ignored."""

from __future__ import annotations

import importlib.util
import json

import pytest

from sparktop.sweep.estimator import estimator
from sparktop.sweep.profiles import precomputed
from sparktop.sweep.profiles.builtin import FOLDER, builtin_profile_names
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile_file import parse_profile
from tests.conftest import REPO


def _gen() -> object:
    spec = importlib.util.spec_from_file_location("gen_pre", REPO / "tools/gen_precomputed.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", builtin_profile_names())
def test_each_shipped_json_is_a_fresh_parse_and_fit(name: str) -> None:
    shipped = (FOLDER / f"{name}.json").read_text(encoding="utf-8")
    assert _gen().render(name) == shipped  # type: ignore[attr-defined]
    yaml_text = (FOLDER / f"{name}.yaml").read_text(encoding="utf-8")
    fresh = parse_profile(yaml_text, f"built-in:{name}.yaml", "built-in")
    assert load_profile(name) == fresh
    designs, errors = estimator.choose_designs(fresh)
    fit = estimator.fitted(load_profile(name))
    assert fit.errors == errors
    assert fit.surface.designs == designs


def test_a_json_not_made_from_its_yaml_is_ignored() -> None:
    name = builtin_profile_names()[0]
    shipped = (FOLDER / f"{name}.json").read_text(encoding="utf-8")
    yaml_text = (FOLDER / f"{name}.yaml").read_text(encoding="utf-8")
    assert precomputed.load(shipped, yaml_text) == load_profile(name)
    assert precomputed.load(shipped, yaml_text + "# edited\n") is None
    doc = json.loads(shipped)
    doc["format"] = "sparktop.precomputed/0"
    assert precomputed.load(json.dumps(doc), yaml_text) is None
    assert precomputed.load("{not json", yaml_text) is None


def test_an_edited_copy_of_a_builtin_is_fitted_afresh() -> None:
    import dataclasses

    four = load_profile("4x-spark-dsv41-flash-1017")
    edited = dataclasses.replace(four, rows=four.rows[1:])
    assert precomputed.fit_for(four) is not None
    assert precomputed.fit_for(edited) is None
    fit = estimator.fitted(edited)
    assert fit.errors == estimator.choose_designs(edited)[1]
