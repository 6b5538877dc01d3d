"""sparktop reads every page exactly as prometheus_client does, valid or not (issue 19 item 9).

A hypothesis differential test builds pages from the pieces that trip parsers (blanks and tabs,
raw control characters in label values, escapes, quoted names, counters without ``_total``,
repeated series, bad values and timestamps, stray comments) and compares sparktop's reading
with ``prometheus_client.parser.text_string_to_metric_families`` (text format) and
``prometheus_client.openmetrics.parser`` (OpenMetrics): the same samples, or both refuse.
The fast reader is also compared on its own: it reads a page as the library does, or steps
aside (:class:`NotUnderstood`) and never invents a reading.

The official OpenMetrics parser suite (prometheus/OpenMetrics ``tests/testdata/parsers``) is
run from the shared fixtures (``../shared/fixtures/openmetrics/parsers``) when they hold it, or
from the local copy ``SPARKTOP_OPENMETRICS_SUITE`` names (it is not vendored in this repo).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from sparktop.sources.engines.reading import WANTED
from sparktop.sources.exposition.page import parse_page
from sparktop.sources.exposition.text import NotUnderstood, ParseBounds, scan_text
from tests.conftest import FIXTURES
from tests.prom_reference import observed, reference

NAMES = [
    "vllm:num_requests_running",
    "vllm_num_requests_running",
    "vllm:prompt_tokens",
    "vllm:prompt_tokens_total",
    "vllm:time_to_first_token_seconds",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_to_first_token_seconds_count",
    "a",
    "a_total",
    "a_created",
    "_total",
    "a.b",
    "1a",
    "",
]
NAMES += NAMES[:10]
TYPES = ["counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "bogus", ""]
LABEL_NAMES = ["engine", "le", "model_name", "x"] * 3 + ["__name__", "__x", "a b", "0a", "a.b", ""]
CHARS = 'a1 ,={}#"\\\t\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00é'
SEPARATORS = [" "] * 6 + ["\t"] * 3 + ["  ", " \t", "", "\x0b", "\x0c", "\x1c"]
VALUES = ["1", "4.0", "0", "-0", "-1.5", "1e3", "+Inf", "-Inf", "NaN", "nan", "1_000", "0x10"]
VALUES += ["1", "4.0", "0.010902", "7", "-0.0", "٣", ".5"]
VALUES += ["5.", "", "abc", "+5", "Infinity", "-0", "1e400", "12345678901234567890123"]
STAMPS = [""] * 6 + [" 1700000000000", " -5", " 1.5", " abc", "\t99", " 1 2"]


@st.composite
def label_value(draw: st.DrawFn) -> str:
    raw = draw(st.text(alphabet=CHARS, max_size=6))
    if draw(st.integers(0, 3)):  # mostly escaped as the format says (only \, " and LF)
        raw = raw.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return raw


@st.composite
def labels(draw: st.DrawFn) -> str:
    pairs = draw(st.lists(st.tuples(st.sampled_from(LABEL_NAMES), label_value()), max_size=3))
    body = ",".join(f'{k}="{v}"' for k, v in pairs)
    if draw(st.integers(0, 5)) == 0:
        body += ","
    return "{" + body + "}"


@st.composite
def sample_line(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    sep = draw(st.sampled_from(SEPARATORS))
    value = draw(st.sampled_from(VALUES))
    stamp = draw(st.sampled_from(STAMPS))
    shape = draw(st.integers(0, 3))
    if shape == 0:
        return f"{name}{sep}{value}{stamp}"
    block = draw(labels())
    if shape == 3:  # Prometheus 3: the name quoted inside the braces
        block = '{"' + name + '"' + ("," + block[1:] if block != "{}" else "}")
        name = ""
    return f"{name}{block}{sep}{value}{stamp}"


@st.composite
def comment_line(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    sep = draw(st.sampled_from([" ", "\t", "  ", "\x0b"]))
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return f"#{sep}TYPE{sep}{name}{sep}{draw(st.sampled_from(TYPES))}"
    if shape == 1:
        return f"#{sep}HELP{sep}{name}{sep}{draw(st.text(alphabet=CHARS, max_size=5))}"
    if shape == 2:
        return f'# TYPE "{name}" {draw(st.sampled_from(TYPES))}'
    return draw(st.sampled_from(["#", "# EOF", "# just words", "#HELP a b", "# HELP", "# TYPE a"]))


LINE = st.one_of(
    *[sample_line()] * 6,
    comment_line(),
    comment_line(),
    st.sampled_from(["", "  ", "\r"]),
    st.text(alphabet=CHARS + "\n", max_size=12),
)


CLEAN_LINE = st.one_of(
    st.builds(
        "{}{} {}".format,
        st.sampled_from(NAMES[:10]),
        st.sampled_from(["", '{engine="0"}', '{engine="1",le="+Inf"}', '{x="a\x0cb"}']),
        st.sampled_from(VALUES[:10]),
    ),
    st.builds("# TYPE {} {}".format, st.sampled_from(NAMES[:10]), st.sampled_from(TYPES[:7])),
    st.builds("# HELP {} {}".format, st.sampled_from(NAMES[:10]), st.sampled_from(["", "d"])),
)


@st.composite
def page(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.one_of(CLEAN_LINE, CLEAN_LINE, LINE), max_size=8))
    pad = draw(st.sampled_from(["", " ", "\t", "\r"]))
    return "\n".join(pad + line for line in lines) + draw(st.sampled_from(["", "\n", "\n# EOF\n"]))


EXAMPLES = int(os.environ.get("SPARKTOP_DIFFERENTIAL_EXAMPLES", "250"))
"""Examples per property (a local run for a report: SPARKTOP_DIFFERENTIAL_EXAMPLES=5000)."""
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(page())
def test_text_pages_read_as_prometheus_client_reads_them(text: str) -> None:
    for wanted in (None, WANTED | {"a", "a_total"}):
        page_ = parse_page(text, wanted)
        event(f"read by {page_.parser}" + (" (refused)" if page_.error else ""))
        assert observed(page_) == reference(text, wanted, om=False), page_.error


@SETTINGS
@given(page())
def test_openmetrics_pages_read_as_the_openmetrics_parser_reads_them(text: str) -> None:
    page_ = parse_page(text, None, openmetrics=True)
    assert observed(page_) == reference(text, None, om=True), page_.error


@SETTINGS
@given(page())
def test_the_fast_reader_agrees_or_steps_aside(text: str) -> None:
    """Before sparktop's own rules: the very samples the library yields, in the same order."""
    try:
        raws, _ = scan_text(text, None, ParseBounds())
    except NotUnderstood:
        event("fast reader stepped aside")
        return
    event("fast reader read it")
    library = [
        (s.name, s.labels, repr(float(s.value)))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]
    assert [(n, labels, repr(v)) for n, labels, v in raws] == library
    assert parse_page(text).parser == "fast"


# -- the official OpenMetrics parser suite, from a local copy -----------------------------------

SUITE_ENV = "SPARKTOP_OPENMETRICS_SUITE"
SHARED_SUITE = FIXTURES / "openmetrics" / "parsers"
"""Where the shared fixtures keep the suite (prometheus/OpenMetrics ``tests/testdata/parsers``
at commit 3bb328ab04d26b25ac548d851619f90d15090e5d: 211 cases), when they have it."""


def suite_root() -> Path | None:
    named = os.environ.get(SUITE_ENV)
    if named:
        return Path(named)
    return SHARED_SUITE if SHARED_SUITE.is_dir() else None


def suite_cases() -> list[Path]:
    root = suite_root()
    if root is None:
        return []
    return sorted(p for p in root.iterdir() if (p / "test.json").is_file())


@pytest.mark.skipif(
    suite_root() is None,
    reason=f"the official OpenMetrics parser suite is not in {SHARED_SUITE} and {SUITE_ENV} is "
    "unset: point it at a checkout's tests/testdata/parsers (github.com/prometheus/OpenMetrics)",
)
def test_duplicate_timestamps_read_the_newest_sample_as_prometheus_ingests_them() -> None:
    """``duplicate_timestamps_0``: a series repeated with rising timestamps is its newest
    sample (the older one was kept); equal timestamps keep the first, like the library (which
    reads OpenMetrics timestamps to the nanosecond: 0.0000000001 s is 0 there)."""
    if not (SHARED_SUITE / "duplicate_timestamps_0").is_dir():
        pytest.skip("the shared OpenMetrics suite is not here")
    for name, expected in (("duplicate_timestamps_0", {"1": 3.0, "2": 4.0}),
                           ("duplicate_timestamps_1", {"1": 1.0, "2": 4.0})):  # fmt: skip
        text = (SHARED_SUITE / name / "metrics").read_text()
        page = parse_page(text, None, openmetrics=True)
        assert not page.error
        assert {s.labels["a"]: s.value for s in page.get("a")} == expected, name
    as_text = parse_page((SHARED_SUITE / "duplicate_timestamps_0" / "metrics").read_text())
    assert {s.labels["a"]: s.value for s in as_text.get("a")} == {"1": 3.0, "2": 5.0}


def test_official_openmetrics_parser_suite(capsys: pytest.CaptureFixture[str]) -> None:
    cases = suite_cases()
    assert cases, f"{SUITE_ENV} has no test.json cases"
    tally = dict.fromkeys(
        ("valid", "invalid", "om_agrees_suite", "om_agrees_lib", "text_agrees_lib", "text_fast"), 0
    )
    for case in cases:
        spec = json.loads((case / "test.json").read_text())
        if spec.get("type") != "text":
            continue
        text = (case / spec.get("file", "metrics")).read_bytes().decode("utf-8", "replace")
        should_parse = bool(spec.get("shouldParse"))
        tally["valid" if should_parse else "invalid"] += 1
        om = observed(parse_page(text, None, openmetrics=True))
        assert om == reference(text, None, om=True), case.name
        tally["om_agrees_lib"] += 1
        tally["om_agrees_suite"] += (om is not None) == should_parse
        as_text = parse_page(text)
        assert observed(as_text) == reference(text, None, om=False), case.name
        tally["text_agrees_lib"] += 1
        tally["text_fast"] += as_text.parser == "fast"
    with capsys.disabled():
        print(f"\nOpenMetrics suite: {tally}")


# -- one hand-written case per category of the official suite (our own inputs) ------------------

E = "# EOF\n"
CATEGORY_CASES: list[tuple[str, str, bool]] = [
    # (category, page, valid OpenMetrics)
    ("blank_line", "req 2\n\n" + E, False),
    ("clashing_names", "# TYPE req counter\n# TYPE req_total counter\n" + E, False),
    ("counter_values", "# TYPE req counter\nreq_total -3\n" + E, False),
    ("counter_values_nan", "# TYPE req counter\nreq_total NaN\n" + E, False),
    ("exemplar_complex_chars", '# TYPE req counter\nreq_total 1 # {id="\\x"} 1\n' + E, True),
    ("exemplar_timestamp", '# TYPE req counter\nreq_total 1 # {a="b"} 1 abc\n' + E, False),
    ("exemplars", '# TYPE req counter\nreq_total 1 # {a="b"}\n' + E, False),
    ("exemplars_on_gauge", '# TYPE g gauge\ng 1 # {a="b"} 1\n' + E, False),
    ("grouping_or_ordering", "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n" + E, False),
    ("help", "# HELP req\n" + E, False),
    ("histograms_no_inf", '# TYPE h histogram\nh_bucket{le="1"} 1\nh_count 1\n' + E, False),
    (
        "histograms_decreasing",
        '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_count 1\n' + E,
        False,
    ),
    ("info_and_stateset_values", "# TYPE i info\ni_info 2\n" + E, False),
    ("invalid_labels", 'req{0a="b"} 1\n' + E, False),
    ("metadata", "# TYPE req gauge\n# FOO req x\nreq 1\n" + E, False),
    ("metadata_in_wrong_place", "req 1\n# TYPE req gauge\n" + E, False),
    ("metric_names", "0req 1\n" + E, False),
    ("missing_equal_or_label_value", "req{a} 1\n" + E, False),
    ("missing_or_extra_commas", 'req{a="1",,b="2"} 1\n' + E, False),
    ("missing_labels_for_a_type", "# TYPE h histogram\nh_bucket 1\n" + E, False),
    ("missing_quotes_on_label_value", "req{a=1} 1\n" + E, False),
    ("missing_value", "req\n" + E, False),
    ("no_eof", "req 1\n", False),
    ("repeated_metadata", "# TYPE req gauge\n# TYPE req gauge\nreq 1\n" + E, False),
    ("stateset_info_values", '# TYPE s stateset\ns{s="a"} 2\n' + E, False),
    ("text_after_eof", "req 1\n" + E + "req 2\n", False),
    ("timestamp", "req 1 abc\n" + E, False),
    ("type", "# TYPE req bogus\n" + E, False),
    ("unit", "# TYPE req_s gauge\n# UNIT req_s bytes\nreq_s 1\n" + E, False),
    ("value", "req 1_0\n" + E, False),
    ("counter_exemplars", '# TYPE req counter\nreq_total 3 # {trace="x"} 1 123\n' + E, True),
    ("empty_brackets", "req{} 1\n" + E, True),
    ("empty_help", "# HELP req \n" + E, True),
    ("empty_label", 'req{a=""} 1\n' + E, True),
    ("escaping", 'req{a="x\\\\y\\"z\\nw"} 1\n' + E, True),
    ("float_gauge", "# TYPE g gauge\ng 1.5e3\n" + E, True),
    ("hash_in_label_value", 'req{a="#1 # 2"} 1\n' + E, True),
    (
        "histogram",
        '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_count 2\nh_sum 3\n' + E,
        True,
    ),
    ("labels_with_curly_braces", 'req{a="{}"} 1\n' + E, True),
    ("leading_zeros", "# TYPE g gauge\ng 007\n" + E, True),
    ("nan", "req NaN\n" + E, True),
    (
        "negative_bucket_gaugehistogram",
        '# TYPE g gaugehistogram\ng_bucket{le="-1"} 1\n'
        'g_bucket{le="+Inf"} 2\ng_gcount 2\ng_gsum -3\n' + E,
        True,
    ),
    ("no_metadata", "req 1\n" + E, True),
    ("null_byte", 'req{a="\\x00"} 1\n'.replace("\\x00", "\x00") + E, True),
    ("stateset", '# TYPE s stateset\ns{s="a"} 1\ns{s="b"} 0\n' + E, True),
    ("summary", '# TYPE s summary\ns{quantile="0.5"} 1\ns_count 2\ns_sum 3\n' + E, True),
    ("timestamps", "req 1 123.5\n" + E, True),
    ("duplicate_timestamps", "req 1 1\nreq 2 1\n" + E, True),  # a tie: the first
    ("newer_timestamp", "req 1 1\nreq 2 2\n" + E, True),  # the newest: 2
    ("uint64_counter", "# TYPE c counter\nc_total 18446744073709551615\n" + E, True),
    ("unit_gauge", "# TYPE g_s gauge\n# UNIT g_s s\ng_s 1\n" + E, True),
    ("untyped", "# TYPE u unknown\nu 1\n" + E, True),
]


@pytest.mark.parametrize(
    ("category", "text", "valid"), CATEGORY_CASES, ids=[c[0] for c in CATEGORY_CASES]
)
def test_each_suite_category_reads_as_prometheus_client_reads_it(
    category: str, text: str, valid: bool
) -> None:
    om = observed(parse_page(text, None, openmetrics=True))
    assert om == reference(text, None, om=True)
    assert (om is not None) == valid, category
    assert observed(parse_page(text)) == reference(text, None, om=False)
