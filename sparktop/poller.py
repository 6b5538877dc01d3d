"""Polls every source on its own long-lived task at ``interval_s`` and hands samples on.

A source's ``sample()`` should never raise; if it does, the poller turns the exception into
an error sample so one bad source never stops the others. A source is never polled again
while its previous poll is running (each task awaits its own poll before scheduling the next).

A :class:`~sparktop.model.PacedSource` (``follow_interval`` and ``self_paced``) is told the
period when the loops start and whenever it changes (an SSH node then streams at that
period); while its ``self_paced`` is true its ``sample()`` itself waits for the next reading,
so its loop polls again at once.

A :class:`BatchedSource` is polled with the other members of its ``batch``: one task and one
``read()`` per batch, then ``sample_from`` per member.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from sparktop.model import (
    EngineSample,
    EngineState,
    NodeSample,
    NodeState,
    PacedSource,
    Sample,
    Source,
)

log = logging.getLogger(__name__)


class SourceBatch(Protocol):
    """What the members of a batch read together each poll (one Prometheus query for every
    node of an inventory)."""

    async def read(self) -> object:
        """This poll's shared reading, whatever the members' ``sample_from`` takes; should not
        raise (a failure is a reading too)."""
        ...


@runtime_checkable
class BatchedSource(Source, Protocol):
    """A source whose poll is one shared reading and a cheap step of its own: ``sample()``
    is ``sample_from(await batch.read())``. The poller reads each batch once and calls every
    member's ``sample_from``, instead of a task and an await per member (256 nodes through
    one Prometheus were 256 tasks a tick for one answer)."""

    @property
    def batch(self) -> SourceBatch: ...

    def sample_from(self, reading: object) -> Sample: ...


Unit = tuple[Source, ...]
"""What one task polls: a source alone, or the members of one batch."""


def units(sources: Iterable[Source]) -> list[Unit]:
    """``sources`` grouped: each batch's members together (at its first member's place), every
    other source alone."""
    out: list[list[Source]] = []
    batches: dict[int, list[Source]] = {}
    for source in sources:
        if isinstance(source, BatchedSource):
            members = batches.get(id(source.batch))
            if members is None:
                members = batches[id(source.batch)] = []
                out.append(members)
            members.append(source)
        else:
            out.append([source])
    return [tuple(unit) for unit in out]


MIN_INTERVAL_S = 0.2
MAX_INTERVAL_S = 60.0


def failure_sample(source: Source, message: str, node_state: NodeState = NodeState.ERROR) -> Sample:
    """A failure sample for ``source``, stamped now: an engine is unreachable, a node gets
    ``node_state``. For sources that raised or did not answer in time."""
    now = time.time()
    if source.kind == "engine":
        return EngineSample(
            engine=source.name,
            time_s=now,
            state=EngineState.UNREACHABLE,
            message=message,
            since_s=now,
        )
    return NodeSample(node=source.name, time_s=now, state=node_state, message=message, since_s=now)


def error_sample(source: Source, exc: BaseException) -> Sample:
    """A failure sample for a source whose ``sample()`` raised."""
    return failure_sample(
        source, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    )


class Poller:
    """One task per source; ``on_sample`` is called on the event loop for every sample."""

    def __init__(
        self,
        sources: Iterable[Source],
        interval_s: float,
        on_sample: Callable[[Sample], None],
    ) -> None:
        self.sources = tuple(sources)
        self._units = units(self.sources)
        self.interval_s = interval_s
        self.on_sample = on_sample
        self._tasks: list[asyncio.Task[None]] = []
        self._running = asyncio.Event()
        self._running.set()
        self._wake = asyncio.Event()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def set_interval(self, interval_s: float) -> None:
        """Change the poll period (clamped to 0.2–60 s); takes effect at the next wait."""
        self.interval_s = min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, interval_s))
        if self._tasks:
            self._follow()
        self._wake.set()

    def _follow(self) -> None:
        for source in self.sources:
            if isinstance(source, PacedSource):
                source.follow_interval(self.interval_s)

    def start(self) -> None:
        self._follow()
        for unit in self._units:
            self._tasks.append(asyncio.create_task(self._loop(unit), name=f"poll:{unit[0].name}"))

    async def poll_once(self) -> list[Sample]:
        """Poll every source once, concurrently, and return the samples (also handed on), in
        the order of ``sources``."""
        polled = await asyncio.gather(*(self._poll_unit(u) for u in self._units))
        if len(polled) == len(self.sources):
            return [samples[0] for samples in polled]
        by_source = {
            id(source): sample
            for unit, samples in zip(self._units, polled, strict=True)
            for source, sample in zip(unit, samples, strict=True)
        }
        return [by_source[id(source)] for source in self.sources]

    async def _poll_unit(self, unit: Unit) -> Sequence[Sample]:
        if len(unit) == 1 and not isinstance(unit[0], BatchedSource):
            return (await self._poll(unit[0]),)
        return await self._poll_batch(unit)

    async def _poll_batch(self, members: Unit) -> list[Sample]:
        """One read for the batch, then each member's sample: a member that raises gets an
        error sample, the others theirs."""
        first: BatchedSource = members[0]  # type: ignore[assignment]
        try:
            reading = await first.batch.read()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a source bug must not kill its loop
            log.exception("batch of %s raised", first.name)
            samples = [error_sample(m, exc) for m in members]
        else:
            samples = []
            for member in members:
                try:
                    sample = member.sample_from(reading)  # type: ignore[attr-defined]
                except Exception as exc:
                    log.exception("source %s raised", member.name)
                    sample = error_sample(member, exc)
                samples.append(sample)
        for sample in samples:
            self.on_sample(sample)
        return samples

    async def _poll(self, source: Source) -> Sample:
        try:
            sample = await source.sample()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a source bug must not kill its loop
            log.exception("source %s raised", source.name)
            sample = error_sample(source, exc)
        self.on_sample(sample)
        return sample

    async def _loop(self, unit: Unit) -> None:
        loop = asyncio.get_running_loop()
        source = unit[0]
        # Asked once: isinstance against a runtime-checkable Protocol walks the protocol's
        # members every call (Python 3.11), a fifth of the monitor's CPU at 4 nodes when it
        # was asked every poll; a source does not change type.
        batched = len(unit) > 1 or isinstance(source, BatchedSource)
        paced = not batched and isinstance(source, PacedSource)
        while True:
            await self._running.wait()
            started = loop.time()
            if batched:
                await self._poll_batch(unit)
            else:
                await self._poll(source)
            if paced and source.self_paced:  # type: ignore[attr-defined]
                continue  # sample() waited for the reading: waiting again would lag behind it
            delay = self.interval_s - (loop.time() - started)
            if delay > 0:
                self._wake.clear()
                # asyncio.timeout, not wait_for: wait_for on Python 3.11 drops a cancel that
                # lands as the wake-up completes (set_interval then aclose hung forever).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()

    async def aclose(self) -> None:
        """Stop every task and close every source."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await asyncio.gather(*(s.aclose() for s in self.sources), return_exceptions=True)
