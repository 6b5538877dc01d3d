"""Alert rules and thresholds are declared once (issue 29, item 4).

A rule declares every id it emits and the :class:`Scope` of each where it is defined
(``@rule``); the node- and engine-scoped sets, ``snapshot``'s availability rules and the alert
engine's handling of a failing source all come from those declarations. The thresholds are
one table; the inventory's ``alerts:`` model and :class:`Thresholds` are built from it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from sparktop.alerts import AlertEngine, EventKind, Thresholds
from sparktop.alerts.context import Finding, Rule, RuleContext, Scope, UndeclaredRule, rule
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.model import Severity
from sparktop.alerts.oneshot import AVAILABILITY_RULES
from sparktop.alerts.rules import ENGINE_SCOPED, NODE_SCOPED, RULES, SCOPES, evaluate
from sparktop.alerts.thresholds import TABLE, settable
from sparktop.cluster import ClusterState
from sparktop.inventory.models import AlertThresholds, Inventory
from sparktop.model import EngineState
from tests.alert_samples import cluster, engine, engine_down, node

REPO = Path(__file__).resolve().parent.parent


def _finding(rule_id: str) -> Finding:
    return Finding(rule=rule_id, subject="dsv41", severity=Severity.WARNING, message="m")


def _ctx() -> RuleContext:
    return RuleContext(state=ClusterState(), thresholds=Thresholds(), counters=CounterTracker(60))


# -- a rule without a declared scope is refused ----------------------------------------------


def test_a_rule_must_declare_its_ids_and_their_scopes() -> None:
    with pytest.raises(TypeError, match="must declare"):
        rule({})
    with pytest.raises(TypeError, match="must be a Scope"):
        rule({"kv.other": "engine"})  # type: ignore[dict-item]


def bare_rule(ctx: RuleContext) -> Iterator[Finding]:
    yield _finding("kv.other")


def test_an_undeclared_rule_is_refused_by_the_engine_and_by_evaluate() -> None:
    """The old failure: a rule added to RULES without NODE_SCOPED/ENGINE_SCOPED ran, and its
    alert outlived its failing source. Now a bare function cannot be registered at all."""
    with pytest.raises(TypeError, match="bare_rule declares no scope"):
        AlertEngine(rules=(bare_rule,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bare_rule declares no scope"):
        evaluate(_ctx(), [bare_rule])  # type: ignore[list-item]


def test_a_rule_emitting_an_id_it_did_not_declare_is_an_error() -> None:
    declared = rule({"kv.usage": Scope.ENGINE})(bare_rule)
    with pytest.raises(UndeclaredRule, match=r"emitted 'kv\.other'.*declared: kv\.usage"):
        evaluate(_ctx(), [declared])


def test_two_rules_may_not_give_one_id_two_scopes() -> None:
    a = rule({"kv.other": Scope.ENGINE})(bare_rule)
    b = rule({"kv.other": Scope.NODE})(bare_rule)
    with pytest.raises(TypeError, match="declared both"):
        AlertEngine(rules=(a, b))


def _emitted_ids() -> set[str]:
    """Every rule id the rule modules pass to a Finding (``rule="…"``) or to
    ``engine_finding(sample, "…", …)``, read from their source."""
    ids: set[str] = set()
    for path in (REPO / "sparktop" / "alerts").glob("*_rules.py"):
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(call, ast.Call):
                continue
            args = [k.value for k in call.keywords if k.arg == "rule"]
            if isinstance(call.func, ast.Name) and call.func.id == "engine_finding":
                args += call.args[1:2]
            ids |= {a.value for a in args if isinstance(a, ast.Constant)}
    return ids


def test_every_id_the_rules_emit_is_declared_and_every_rule_is_registered() -> None:
    assert all(isinstance(r, Rule) for r in RULES)
    emitted = _emitted_ids()
    assert len(emitted) >= 20 and all(re.fullmatch(r"[a-z]+\.[a-z_]+", i) for i in emitted)
    assert emitted == set(SCOPES)


def test_the_scoped_sets_come_from_the_declarations() -> None:
    """The sets the hand-kept lists held, plus engine.stalled (read from the engine's page,
    it was missing from ENGINE_SCOPED)."""
    assert set(NODE_SCOPED) == {
        "gpu.throttle", "gpu.temperature", "gpu.hidden_low_power", "node.memory_pressure",
        "fabric.link_down", "fabric.errors", "fabric.asymmetry", "gpu.low_power_vs_peers",
    }  # fmt: skip
    assert set(ENGINE_SCOPED) == {
        "kv.usage", "queue.pool_bound", "queue.scheduler_bound", "kv.preemptions",
        "kv.exhaustion", "spec.acceptance", "expected.ttft", "expected.decode", "tp.straggler",
        "engine.stalled",
    }  # fmt: skip
    assert set(AVAILABILITY_RULES) == {
        "node.down", "node.gpu_unavailable", "engine.down", "engine.stale", "engine.degraded",
        "engine.restarted",
    }  # fmt: skip
    assert SCOPES["tp.straggler"] is Scope.ENGINE_NODE


def test_a_stalled_engine_whose_page_then_fails_leaves_engine_down_alone() -> None:
    """engine.stalled reads the engine's page: when the page stops answering the stall alert
    is cleared at once ("engine down, no data"), not left recovering beside engine.down."""
    group = {"dsv41": ("spark-1",)}
    alerts = AlertEngine(Thresholds(hold_s=10.0), tp_groups=group)
    state = cluster(node("spark-1", 100.0))
    stalled = {"running": 6.0, "no_tokens_s": 34.0, "kv_still_s": 34.0}
    for t in range(100, 112):
        state.apply(node("spark-1", float(t)))
        state.apply(engine(t=float(t), **stalled))
        alerts.update(state, float(t))
    assert [a.rule for a in alerts.active()] == ["engine.stalled"]
    state.apply(engine_down("dsv41", 112.0, EngineState.UNREACHABLE))
    events = alerts.update(state, 112.0)
    cleared = [e.alert for e in events if e.kind is EventKind.CLEARED]
    assert [a.rule for a in cleared] == ["engine.stalled"]
    assert cleared[0].message.startswith("engine down, no data")
    assert "engine.stalled" not in {a.rule for a in alerts.active()}


# -- one table of thresholds -----------------------------------------------------------------


def test_thresholds_are_the_tables_rows_with_its_defaults() -> None:
    assert [f.name for f in fields(Thresholds)] == [t.name for t in TABLE]
    defaults = Thresholds()
    assert {t.name: getattr(defaults, t.name) for t in TABLE} == {t.name: t.default for t in TABLE}
    assert all(t.unit and t.help for t in TABLE)


def test_the_inventorys_threshold_fields_equal_the_tables() -> None:
    model = AlertThresholds.model_fields
    assert list(model) == [t.name for t in settable()]
    for t in settable():
        assert model[t.name].default == t.default, t.name
    assert Inventory.model_fields["alerts"].default == AlertThresholds()
    # Every settable value reaches the rules' Thresholds.
    given = AlertThresholds(**{t.name: t.settable.high for t in settable() if t.settable})
    applied = Thresholds.from_config(given)
    assert all(getattr(applied, t.name) == t.settable.high for t in settable() if t.settable)


@pytest.mark.parametrize("doc", ["README.md", "docs/inventory.md"])
def test_the_documented_alerts_section_shows_the_tables_defaults(doc: str) -> None:
    text = (REPO / doc).read_text(encoding="utf-8")
    block = re.search(r"^alerts:[^\n]*\n((?:  \S[^\n]*\n)+)", text, re.M)
    assert block, f"{doc} has no alerts: example"
    shown = yaml.safe_load(block.group(1))
    defaults = {t.name: t.default for t in settable()}
    assert shown and {k: defaults.get(k) for k in shown} == shown
