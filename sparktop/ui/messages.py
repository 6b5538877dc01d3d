"""Messages the UI passes around, as small dataclasses named as facts."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from sparktop.model import NodeSample, Sample
from sparktop.ui.events import EventLike


@dataclass
class SampleArrived(Message):
    """A sample from a feeder outside the poller (replay, tests) to record into the state.

    Samples of the same subject replace each other in the queue, so a slow UI drops stale
    ones instead of queueing them.
    """

    sample: Sample

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SampleArrived) and _subject(message.sample) == _subject(
            self.sample
        )


def _subject(sample: Sample) -> tuple[str, str]:
    if isinstance(sample, NodeSample):
        return ("node", sample.node)
    return ("engine", sample.engine)


@dataclass
class EventRecorded(Message):
    """An event (derived transition or alert) was added to the events pane."""

    event: EventLike


@dataclass
class NodeChosen(Message):
    """The operator asked for a node's detail screen (Enter on a row, palette, mouse)."""

    node: str
    gpu_key: str | None = None


@dataclass
class EngineChosen(Message):
    """The operator asked for an engine's detail screen (Enter or a click on its block)."""

    engine: str


@dataclass
class LayoutChanged(Message):
    """A widget's width changed so its content must be laid out again (render now)."""
