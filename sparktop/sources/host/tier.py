"""The host files' tier of the one-shot probe: read every few seconds, repeated in between.

The host files (PSI, ``/proc/uptime``, the RDMA ports, ``spark_hwmon``;
:data:`~sparktop.sources.probe.HOST_FILES`) change slowly and cost the node a ``grep`` over
a few hundred sysfs files, so a one-shot probe asks for them only every
:data:`~sparktop.sources.probe.SLOW_TIER_S` (as the stream's slow tier does); the probes in
between carry the last host section read, so a sample always has one. The node's own clock
(``/proc/uptime``) travels with the section: a repeated section is no new fabric reading.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from sparktop.sources.probe import MARK, SECTION_HOST, SLOW_TIER_S

HOST_MAX_CHARS = 128_000
"""Characters of a host section kept (``HOST_MAX_LINES`` lines of sysfs ``path:value``)."""


class HostTier:
    """When one node's one-shot probe reads the host files, and the last section it read.

    :attr:`due` says whether the next probe asks for them; :meth:`complete` gives a probe's
    output with a host section: its own (kept for later) or the last one kept.
    """

    def __init__(
        self, every_s: float = SLOW_TIER_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every_s = every_s
        self._clock = clock
        self._at = -math.inf
        self._section = ""
        self.reads = 0
        """Probes so far that asked for the host files."""

    @property
    def due(self) -> bool:
        """True when the next one-shot probe should read the host files."""
        return self._clock() - self._at >= self.every_s

    def asked(self) -> None:
        """The probe about to run reads the host files (a failed read is retried a period
        later, not on every poll)."""
        self._at = self._clock()
        self.reads += 1

    def complete(self, text: str) -> str:
        """``text`` (a probe's output) ending in a host section: one it read is kept when
        it is whole (its exit status was printed); one it did not read is the last kept."""
        cut = text.find(f"{MARK}{SECTION_HOST}\n")
        if cut >= 0:
            section = text[cut:]
            if f"\n{MARK}rc " in section and len(section) <= HOST_MAX_CHARS:
                self._section = section
            return text
        return text + self._section if text.endswith("\n") else text

    def reset(self) -> None:
        """A new connection (perhaps a rebooted node): read the host files at the next probe."""
        self._at = -math.inf
