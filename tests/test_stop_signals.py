"""SIGTERM/SIGHUP stop ``sparktop demo`` like Ctrl-C (sparktop.sim.signals), even when the
first :class:`Terminated` is swallowed where it lands."""

from __future__ import annotations

import os
import signal

import pytest

from sparktop.sim.signals import Terminated, raise_on_signals


@pytest.mark.timeout(20)
def test_a_swallowed_stop_is_raised_again_until_clean_up_starts() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with raise_on_signals() as stopping:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()  # the handler runs here at the latest
        except Terminated as first:
            assert first.exit_code == 143
        # As if a finalizer or a callback had caught it: it comes again.
        with pytest.raises(Terminated) as again:
            signal.pause()
        assert again.value.exit_code == 143
        stopping.cleaning()
        os.kill(os.getpid(), signal.SIGTERM)  # ignored now: clean-up is not cut short
    assert signal.getsignal(signal.SIGTERM) == before
