"""A streamed poll's sample from the stream's pieces, not from its text split again.

A streamed poll's text is its interval's GPU section (:meth:`StreamInterval.gpu_section`)
followed by the slow tier's last reading (``/proc/meminfo``, the compute apps, the host
files), the same reading for ~10 s of polls. :func:`parse_streamed` gives the sample
:func:`~sparktop.sources.nvsmi.node.parse_probe_output` gives for that text, without finding
its sections again: the GPU section is the interval's header and rows, and the slow tier's
sections are split once per reading and found again by the reading's own string (its hash
kept), where the text's copy of it was hashed again every poll
(tests/test_nvsmi_streamed.py compares the two on every captured and hand-made case).
"""

from __future__ import annotations

from sparktop.model import NodeSample
from sparktop.sources.nvsmi.node import (
    RAW_MAX,
    parse_probe_output,
    parse_sections,
    split_tail,
)
from sparktop.sources.nvsmi.stream_rows import StreamInterval
from sparktop.sources.probe import MARK, SECTION_GPU, SECTION_MEMINFO

_SLOW_START = f"{MARK}{SECTION_MEMINFO}"


def parse_streamed(node: str, interval: StreamInterval, slow: str, time_s: float) -> NodeSample:
    """``parse_probe_output(node, interval.gpu_section() + slow, time_s)``; ``slow`` is the
    slow tier's text (from its ``meminfo`` marker on, or "" before the first reading).

    Where the pieces could read otherwise as one text (a marker in a GPU row, a slow text
    that does not start at its marker), the text is parsed as a whole."""
    text = interval.gpu_section() + slow
    body = "\n".join((interval.header, *interval.rows))
    if MARK in body or (slow and not slow.startswith(_SLOW_START)):
        return parse_probe_output(node, text, time_s)
    # The text's sections: the GPU section's body between its marker and its exit status,
    # then the slow tier's (a name's first section wins, as split_probe keeps it).
    sections: dict[str, tuple[str, int | None]] = {SECTION_GPU: (body, 0)}
    if slow:
        for name, section in split_tail(slow).items():
            sections.setdefault(name, section)
    try:
        return parse_sections(node, sections, time_s, text[:RAW_MAX])
    except Exception:  # the whole text's parse makes it the same node state
        return parse_probe_output(node, text, time_s)
