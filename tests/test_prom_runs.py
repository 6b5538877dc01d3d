"""Runs of plain lines, read by one regular expression per run, read as the line reader does.

``scan_text`` reads the plain lines of a family as runs (``promtext.plain_run``) and any other
line alone. With runs turned off (``plain_run`` answering "no run here") every line goes
through the line reader, which ``tests/test_prom_differential.py`` holds to prometheus_client.
Here both readings of the same page must be the same: the same samples (name, labels, value,
order) and declarations, or the same refusal with the same message; and whichever reads it,
the samples are the library's own. Pages are mostly plain families with one odd line put
anywhere (a tab, ``\\r``, an escape, ``}`` in a value, a repeated label, ``__name__``, too
many labels, a name from another family, a blank line), and the clock/series checks are made
every 3 lines so runs are cut where the line reader looks at them.
"""

from __future__ import annotations

import gc
import re
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import product

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from sparktop.sources.engines import histread
from sparktop.sources.engines.reading import WANTED, read_page
from sparktop.sources.exposition import tables as prom_tables
from sparktop.sources.exposition import text as promtext
from sparktop.sources.exposition.grammar import VALUE
from sparktop.sources.exposition.page import parse_page, promql_table_to_text, spellings
from sparktop.sources.exposition.runs import MAX_BLOCK_CHARS, PLAIN_LABELS, PLAIN_LINE, PassedRuns
from sparktop.sources.exposition.text import (
    SAMPLE,
    NotUnderstood,
    PageRefused,
    ParseBounds,
    scan_text,
)
from sparktop.testing.vllm_page import FakeVllm, Load
from tests.conftest import FIXTURES
from tests.prom_reference import observed, reference

ACCEPT = frozenset(spellings(WANTED | {"f", "f_total", "g", "h_bucket", "h_count", "h_sum"}))


@contextmanager
def checks_every(lines: int) -> Iterator[None]:
    """The clock and series checks every ``lines`` lines (runs end there)."""
    real = promtext.CHECK_EVERY
    promtext.CHECK_EVERY = lines
    try:
        yield
    finally:
        promtext.CHECK_EVERY = real


@contextmanager
def lines_only() -> Iterator[None]:
    """Every line through the line reader: no run is ever found (nor known from before)."""
    real, runs = promtext.plain_run, promtext._page_runs
    promtext.plain_run = lambda text, pos, max_lines, careful: ([], pos)
    promtext._page_runs = lambda max_labels: PassedRuns()
    try:
        yield
    finally:
        promtext.plain_run, promtext._page_runs = real, runs


def reading(text: str, accept: frozenset[str] | None, bounds: ParseBounds) -> object:
    """What ``scan_text`` says: its samples (labels as dicts, values by repr) and
    declarations, or the refusal and its message."""
    try:
        raws, decls = scan_text(text, accept, bounds)
    except NotUnderstood:
        return "not understood"
    except PageRefused as exc:
        return f"refused: {exc}"
    return [(n, dict(labels), repr(v)) for n, labels, v in raws], decls


DEFAULT = ParseBounds()


def both(text: str, accept: frozenset[str] | None, bounds: ParseBounds = DEFAULT) -> object:
    with lines_only():
        by_lines = reading(text, accept, bounds)
    by_runs = reading(text, accept, bounds)
    assert by_runs == by_lines
    return by_runs


def library(text: str) -> list[tuple[str, dict[str, str], str]]:
    return [
        (s.name, s.labels, repr(float(s.value)))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


# -- generated pages ----------------------------------------------------------------------------

FAMILIES = [("f", "counter"), ("g", "gauge"), ("h", "histogram"), ("f_total", "counter")]
FAMILIES += [("vllm:num_requests_running", "gauge"), ("s", "summary"), ("u", "untyped")]
ODD = [
    "\t",
    "\r",
    "",
    ' x="a\\"b"',
    ' x="}"',
    ' x="1",x="2"',
    ' __name__="n"',
    " " + ",".join(f'l{i}="v"' for i in range(6)),
    " FOREIGN",
    "  ",
    " TIMESTAMP",
    " -0",
]


@st.composite
def family(draw: st.DrawFn) -> str:
    name, typ = draw(st.sampled_from(FAMILIES))
    suffixes = {"histogram": ["_bucket", "_count", "_sum"], "summary": ["", "_count", "_sum"]}
    lines = [f"# HELP {name} d", f"# TYPE {name} {typ}"][draw(st.integers(0, 1)) :]
    for i in range(draw(st.integers(0, 9))):
        sample = name + draw(st.sampled_from(suffixes.get(typ, [""])))
        engine = draw(st.sampled_from(["0", "1", "2"]))
        le = f',le="{draw(st.sampled_from(["0.1", "1", "+Inf"]))}"' if "bucket" in sample else ""
        value = draw(st.sampled_from(["1", "2.5", "0", "-0", "NaN", "+Inf", "1e3", ".5"]))
        lines.append(f'{sample}{{engine="{engine}"{le}}} {value}' if i % 4 else f"{sample} {value}")
    if lines and draw(st.integers(0, 2)) == 0:  # one odd line, anywhere
        at = draw(st.integers(0, len(lines) - 1))
        odd = draw(st.sampled_from(ODD))
        line = lines[at]
        if odd in ("\t", "\r", "", "  "):
            lines[at] = {"\t": line.replace(" ", "\t", 1), "\r": line + "\r"}.get(odd, odd)
        elif odd == " FOREIGN":
            lines.insert(at, 'vllm:num_requests_waiting{engine="0"} 1')
        elif odd == " TIMESTAMP":
            lines[at] = line + " 1700000000000"
        elif odd == " -0":
            lines[at] = line.rsplit(" ", 1)[0] + " -0"
        elif "{" in line and not line.startswith("#"):
            lines[at] = line.replace("{", "{" + odd.strip() + ",", 1)
    return "\n".join(lines)


@st.composite
def page(draw: st.DrawFn) -> str:
    return "\n".join(draw(st.lists(family(), max_size=5))) + draw(st.sampled_from(["\n", ""]))


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    page(),
    st.sampled_from([None, ACCEPT]),
    st.sampled_from([ParseBounds(), ParseBounds(max_series=4, max_labels=5)]),
)
def test_runs_read_every_page_as_the_line_reader_does(
    text: str, accept: frozenset[str] | None, bounds: ParseBounds
) -> None:
    with checks_every(3):
        said = both(text, accept, bounds)
    event(said if isinstance(said, str) else "read")
    if accept is None and bounds == ParseBounds() and not isinstance(said, str):
        assert said[0] == library(text)  # type: ignore[index]


@SETTINGS
@given(page())
def test_pages_with_runs_read_as_prometheus_client_reads_them(text: str) -> None:
    for wanted in (None, WANTED | {"f", "f_total", "g"}):
        assert observed(parse_page(text, wanted)) == reference(text, wanted, om=False)


# -- the plain grammar is the reader's ----------------------------------------------------------


@given(
    st.sampled_from(["a", "vllm:x_total", "_b:c"]),
    st.lists(
        st.tuples(
            st.sampled_from(["engine", "le", "x_1"]),
            st.text(alphabet='a1 ,={#é\x0b\x1c"\\}\t', max_size=4),
        ),
        max_size=3,
    ),
    st.sampled_from(["1", "-0", "+Inf", "NaN", "1e-3", "5.", ".5", "1_0", "0x1", "+", "1e"]),
    st.sampled_from(["", " 17", " -5", "\t9"]),
)
def test_a_plain_line_is_a_sample_line_with_the_same_groups(
    name: str, pairs: list[tuple[str, str]], value: str, stamp: str
) -> None:
    block = "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}" if pairs else ""
    line = f"{name}{block} {value}{stamp}"
    match = PLAIN_LINE.fullmatch(line + "\n")
    if match is None or (match.group(2) and not PLAIN_LABELS.fullmatch(match.group(2))):
        return  # not plain: read by the line reader
    try:
        float(match.group(3))
    except ValueError:
        return  # not plain either
    sample = SAMPLE.fullmatch(line.strip())
    assert sample is not None and line.strip() == line
    assert (sample.group(1), sample.group(2) or "", sample.group(3)) == match.groups("")


def test_float_reads_exactly_the_value_grammar_over_number_characters() -> None:
    """What lets a run check its values with float(): every string of up to 5 of these
    characters is read by float() exactly when it is a VALUE."""
    strings = ("".join(chars) for n in range(6) for chars in product("0.eE+-", repeat=n))
    for text in strings:
        try:
            float(text)
            reads = True
        except ValueError:
            reads = False
        assert reads == (re.fullmatch(VALUE, text) is not None), text


# -- pages that matter --------------------------------------------------------------------------


def bench_page() -> str:
    """The page ``benchmarks/bench_scrape.py`` times: 8 engines, every family, spec decode."""
    fake = FakeVllm(engines=8, full=True, spec_decode=True, kv_cache_size_tokens=1_429_328)
    for i, engine in enumerate(fake.engines):
        fake.load[engine] = Load(4700, 65.0, 0.1, requests_per_s=2 + i, prompt_tokens=2048)
        fake.set_gauges(engine, running=6, waiting=i % 3, kv_usage=0.1 * (i + 1))
    fake.advance(600)
    return fake.page().decode()


def test_the_benchmark_page_reads_the_same_both_ways_and_as_the_library_does() -> None:
    text = bench_page()
    assert text.count("\n") > 2 * promtext.CHECK_EVERY  # runs are cut at the checks
    for accept in (None, ACCEPT):
        said = both(text, accept)
        assert not isinstance(said, str)
    assert both(text, None)[0] == library(text)  # type: ignore[index]
    assert parse_page(text).parser == "fast"


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "metrics").glob("*.*")))
def test_every_metrics_fixture_reads_the_same_both_ways(name: str) -> None:
    text = (FIXTURES / "metrics" / name).read_text()
    if name.endswith(".txt"):
        text = promql_table_to_text(text)
    for accept in (None, ACCEPT):
        both(text, accept)


def family_of(lines: int, odd: str | None = None, at: int = 0, name: str = "g") -> str:
    rows = [f'{name}{{engine="{i % 8}",i="{i}"}} {i}' for i in range(lines)]
    if odd is not None:
        rows[at] = odd
    return f"# TYPE {name} gauge\n" + "\n".join(rows) + "\n"


@pytest.mark.parametrize(
    ("odd", "said"),
    [
        ('g{i="1",i="2"} 1', "not understood"),
        ("g{" + ",".join(f'l{i}="v"' for i in range(200)) + "} 1", "refused: line 3002 has"),
        ('g{__name__="x"} 1', "not understood"),
        ('g{a="x\\"y"} 1', "read"),
        ('g{a="}"} 1', "read"),
        ("g\t1", "read"),
        ("g 1\r", "read"),
        ("", "read"),
        ("other 1", "read"),
        ("g 1 2 3", "not understood"),
        ('g{a="1" 1', "not understood"),  # a block that would run into the next line
        ("g 1e", "not understood"),
        ("g +", "not understood"),
        ("g 1.5e+3", "read"),
        ('g{a="' + "x" * 600 + '"} 1', "read"),  # longer than a plain block
    ],
)
def test_one_odd_line_deep_in_a_long_family_is_met_where_it_is(odd: str, said: str) -> None:
    text = family_of(5000, odd, at=3000)
    got = both(text, None)
    assert (got if isinstance(got, str) else "read").startswith(said)
    if said == "read":
        assert got[0] == library(text)  # type: ignore[index]


def test_a_page_over_the_series_bound_says_the_same_count_both_ways() -> None:
    text = family_of(30_000) + family_of(300, name="vllm:num_requests_running")
    for bounds in (ParseBounds(), ParseBounds(max_series=25_000)):
        said = both(text, None, bounds)
        assert isinstance(said, str) and said.startswith("refused: page has ")


def test_a_crlf_page_is_read_line_by_line_as_the_library_reads_it() -> None:
    text = family_of(3000).replace("\n", "\r\n")
    assert both(text, None)[0] == library(text)  # type: ignore[index]


def test_a_block_passed_under_one_label_bound_is_refused_under_a_smaller_one() -> None:
    text = family_of(10)
    assert not isinstance(both(text, None), str)  # the blocks are now remembered
    assert both(text, None, ParseBounds(max_labels=1)) == "refused: line 2 has 2 labels; limit 1"


def test_the_shared_block_memo_stays_bounded() -> None:
    prom_tables._BLOCKS.clear()
    both(family_of(prom_tables.MAX_BLOCKS + 100), None)
    assert 0 < len(prom_tables._BLOCKS) <= prom_tables.MAX_BLOCKS
    long = 'g{a="' + "x" * MAX_BLOCK_CHARS + '"} 1\n'
    both("# TYPE g gauge\n" + long, None)
    assert not any(len(b) > MAX_BLOCK_CHARS for b in prom_tables._BLOCKS)


def test_the_tables_shared_by_pages_start_afresh_once_full() -> None:
    """Blocks passed and values read are kept from page to page (an engine serves the same
    ones every scrape), bounded: a page that fills them leaves the next page fresh ones."""
    big = "# TYPE g gauge\n" + "".join(
        f'g{{i="{i}"}} {i}.5\n' for i in range(prom_tables.MAX_VALUES + 10)
    )
    slow_machine = ParseBounds(max_cpu_s=60.0)  # the lines one by one take seconds here
    assert both(big, frozenset(), slow_machine) == ([], [("TYPE", "g", "gauge")])
    small = family_of(4)
    first = both(small, None)
    assert len(prom_tables._PASSED[DEFAULT.max_labels]) < 10
    assert len(prom_tables._VALUES[0]) < 10
    assert both(small, None) == first  # read again from the tables it filled


def test_the_value_table_holds_two_rounds_of_big_engine_pages_in_about_a_mib() -> None:
    """Full, the value table holds about a MiB (each text is the page's own string); a round
    of eight engines serving the full 8-rank page fills under half of it, so each
    page finds the texts it repeats from the round before."""
    engines = [FakeVllm(engines=8, full=True, spec_decode=True) for _ in range(8)]
    for i, engine in enumerate(engines):  # each at its own point of its run: other counts
        engine.advance(60.0 * (i + 1))
    prom_tables.forget_values()
    for engine in engines:
        assert parse_page(engine.page().decode(), WANTED).samples
    assert 0 < len(prom_tables._VALUES[0]) <= prom_tables.MAX_VALUES // 2
    # Full: distinct value texts as a page's counters have them.
    page = "# TYPE g gauge\n" + "".join(
        f"g {i * 7919 % 10**7}.{i % 97}\n" for i in range(prom_tables.MAX_VALUES - 1)
    )
    prom_tables.forget_values()
    gc.collect()
    tracemalloc.start()
    try:
        parse_page(page, None, bounds=ParseBounds(max_cpu_s=60.0))
        gc.collect()
        full = tracemalloc.get_traced_memory()[0]
        assert len(prom_tables._VALUES[0]) == prom_tables.MAX_VALUES - 1
        prom_tables.forget_values()
        gc.collect()
        held = full - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 1.25 * 2**20, f"{held / 2**20:.2f} MiB held by a full value table"


def test_the_value_memo_is_counted_and_emptied_for_a_leak_check() -> None:
    """A leak check empties the value table before it counts memory: the next page reads
    the same from a fresh table and fills it again; the label tables stay."""
    text = bench_page()
    prom_tables.forget_values()  # what other tests left
    first = both(text, ACCEPT)
    sizes = prom_tables.memo_sizes()
    assert sizes["values"] > 0 and sizes["passed"] > 0 and sizes["run_chars"] > 0
    prom_tables.forget_values()
    assert prom_tables.memo_sizes() == {**sizes, "values": 0}
    assert both(text, ACCEPT) == first
    assert prom_tables.memo_sizes() == sizes


def test_a_stretch_known_plain_counts_only_for_its_family_and_bound() -> None:
    """A family nothing is read from is checked once per text: the same lines under another
    family, under a smaller label bound, or with one line changed are checked again."""
    text = family_of(10)
    nothing = frozenset[str]()
    assert both(text, nothing) == ([], both(text, None)[1])  # type: ignore[index]
    assert both(text, nothing) == both(text, nothing)  # now known
    said = both(text, nothing, ParseBounds(max_labels=1))
    assert said == "refused: line 2 has 2 labels; limit 1"
    assert both(text.replace('i="3"', 'i="3",i="4"'), nothing) == "not understood"
    moved = "# TYPE y gauge\n" + text.split("\n", 1)[1]  # g's lines: no longer y's
    assert both(moved, frozenset({"g"}))[0][:1] == [("g", {"engine": "0", "i": "0"}, "0.0")]  # type: ignore[index]


def test_shared_labels_are_read_only() -> None:
    raws, _ = scan_text(family_of(4) + 'h{engine="3",i="3"} 7\n', None, ParseBounds())
    assert raws[3] == ("g", {"engine": "3", "i": "3"}, 3.0)
    assert raws[4][1] is raws[3][1]  # one block, one mapping
    with pytest.raises(TypeError):
        raws[0][1]["engine"] = "9"  # type: ignore[index]


def test_runs_end_where_the_clock_is_looked_at() -> None:
    """A long family is still refused by the CPU budget, at the same check both ways."""
    said = both(family_of(5000), None, ParseBounds(max_cpu_s=0.0))
    assert said == "refused: parsing took over 0 s of CPU; page refused"


def test_histograms_read_the_same_from_remembered_buckets_and_library_labels() -> None:
    """vllm's bucket memo (by the identity of a shared label mapping) changes no reading:
    a page read twice, and the same page read by prometheus_client (its own dicts, never
    remembered), give the same histograms."""
    text = bench_page()
    histread._BUCKETS.clear()
    first = read_page(parse_page(text, WANTED), "vllm")
    remembered = len(histread._BUCKETS)
    again = read_page(parse_page(text, WANTED), "vllm")
    assert remembered > 0 and len(histread._BUCKETS) == remembered
    by_library = parse_page(text + '# HELP "a.b" x\n', WANTED)  # only the library reads it
    assert by_library.parser == "prometheus_client"
    assert read_page(by_library, "vllm") == first == again
    assert len(histread._BUCKETS) == remembered
