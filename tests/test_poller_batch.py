"""The poller reads a batch of sources once per poll (one task for all its members)."""

from __future__ import annotations

import asyncio

from sparktop.model import NodeSample, NodeState, Sample
from sparktop.poller import BatchedSource, Poller, units


class Batch:
    def __init__(self, fail: bool = False) -> None:
        self.reads = 0
        self.fail = fail

    async def read(self) -> object:
        self.reads += 1
        if self.fail:
            raise RuntimeError("the shared read broke")
        await asyncio.sleep(0)  # a real read awaits its answer
        return self.reads


class Member:
    kind = "node"

    def __init__(self, name: str, batch: Batch, *, broken: bool = False) -> None:
        self.name = name
        self.batch = batch
        self.broken = broken

    def sample_from(self, reading: object) -> Sample:
        if self.broken:
            raise ValueError(f"{self.name} cannot read {reading}")
        return NodeSample(node=self.name, time_s=float(reading), message=f"read {reading}")  # type: ignore[arg-type]

    async def sample(self) -> Sample:
        return self.sample_from(await self.batch.read())

    async def aclose(self) -> None:
        pass


class Alone:
    kind = "node"

    def __init__(self, name: str) -> None:
        self.name = name
        self.polls = 0

    async def sample(self) -> Sample:
        self.polls += 1
        return NodeSample(node=self.name, time_s=0.0)

    async def aclose(self) -> None:
        pass


def test_batched_sources_are_grouped_at_their_first_members_place() -> None:
    one, two = Batch(), Batch()
    a, b, c = Member("a", one), Member("b", two), Member("c", one)
    solo = Alone("solo")
    assert isinstance(a, BatchedSource) and not isinstance(solo, BatchedSource)
    assert units([a, solo, b, c]) == [(a, c), (solo,), (b,)]


async def test_one_read_per_batch_and_samples_in_source_order() -> None:
    batch = Batch()
    members = [Member(f"n{i}", batch) for i in range(5)]
    solo = Alone("solo")
    seen: list[str] = []
    sources = [members[0], solo, *members[1:]]
    poller = Poller(sources, 1.0, lambda s: seen.append(s.node))  # type: ignore[union-attr]
    for tick in (1, 2):
        samples = await poller.poll_once()
        assert batch.reads == tick
        assert [s.node for s in samples] == [s.name for s in sources]  # type: ignore[union-attr]
        assert {s.message for s in samples if s.node != "solo"} == {f"read {tick}"}  # type: ignore[union-attr]
    assert solo.polls == 2
    assert sorted(seen) == sorted(2 * [s.name for s in sources])


async def test_a_member_that_raises_gets_an_error_sample_the_others_theirs() -> None:
    batch = Batch()
    good, bad = Member("good", batch), Member("bad", batch, broken=True)
    samples = await Poller([good, bad], 1.0, lambda s: None).poll_once()
    assert isinstance(samples[0], NodeSample) and samples[0].ok
    assert isinstance(samples[1], NodeSample) and samples[1].state is NodeState.ERROR
    assert samples[1].message == "ValueError: bad cannot read 1"


async def test_a_batch_whose_read_raises_gives_every_member_the_error() -> None:
    batch = Batch(fail=True)
    members = [Member("a", batch), Member("b", batch)]
    samples = await Poller(members, 1.0, lambda s: None).poll_once()
    assert [s.state for s in samples] == [NodeState.ERROR, NodeState.ERROR]  # type: ignore[union-attr]
    assert {s.message for s in samples} == {"RuntimeError: the shared read broke"}


async def test_started_poller_reads_each_batch_once_a_tick() -> None:
    batch = Batch()
    members = [Member(f"n{i}", batch) for i in range(8)]
    counts: dict[str, int] = {}
    enough = asyncio.Event()

    def on_sample(sample: Sample) -> None:
        counts[sample.node] = counts.get(sample.node, 0) + 1  # type: ignore[union-attr]
        if len(counts) == len(members) and min(counts.values()) >= 3:
            enough.set()

    poller = Poller(members, 0.2, on_sample)
    poller.start()
    try:
        await asyncio.wait_for(enough.wait(), 30)
    finally:
        await poller.aclose()
    # every member sampled once per read: one task polls them all together (a read in
    # flight when the poller closed gave no samples)
    (polls,) = set(counts.values())
    assert batch.reads - polls in (0, 1)
