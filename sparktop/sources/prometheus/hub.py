"""One Prometheus shared by every node and engine source of an inventory.

Each source asks the hub for its tick's answer; the hub runs at most one query per kind
(``nodes``, ``engines``) per tick however many sources ask: a query in flight is shared, and
an answer younger than half the poll interval is reused. So the HTTP cost per tick is two
queries for 2 nodes or 256. The answer is indexed once (by the host part of ``instance``, and
by the whole label if a target names a port) so each source finds its series without
scanning everyone's.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sparktop.sources.prometheus.api import PromClient, PromFailure, QueryResult, Series
from sparktop.sources.prometheus.promql import Target, engine_query, host_part, node_query


@dataclass(slots=True)
class _Answer:
    """One query and the sources awaiting it. Each waiter has a future of its own, so a
    cancelled source never cancels the query the others wait for (what ``asyncio.shield``
    does, at a third of its cost: 256 sources wait on one query every tick)."""

    started: float
    task: asyncio.Future[QueryResult]
    hold_s: float
    """Seconds from ``started`` the settled answer is reused for."""
    waiters: list[asyncio.Future[QueryResult]] = field(default_factory=list)

    def settle(self, task: asyncio.Future[QueryResult]) -> None:
        """Hand the query's outcome to every waiter still waiting."""
        waiters, self.waiters = self.waiters, []
        if task.cancelled():
            for waiter in waiters:
                waiter.cancel()
            return
        error = task.exception()  # read even without waiters, so it is never "unretrieved"
        for waiter in waiters:
            if waiter.done():  # its source was cancelled
                continue
            if error is None:
                waiter.set_result(task.result())
            else:
                waiter.set_exception(error)


def _refused(task: asyncio.Future[QueryResult]) -> bool:
    """True when ``task`` failed with an answer over a cap."""
    if not task.done() or task.cancelled():
        return False
    error = task.exception()
    return isinstance(error, PromFailure) and error.refused


_Index = dict[str, list[Series]]
BACKOFF_MAX_S = 60.0
"""Longest wait before asking again for an answer that was refused as over a cap."""
MAX_INSTANCES = 65_536
"""Bound of the remembered ``instance`` → host parts (a cluster has a few per node)."""


class PromHub:
    """Batched, shared queries for ``nodes`` and ``engines`` targets.

    ``window_s`` is the span of engine rates and quantiles (sparktop's engine window);
    ``clock`` is monotonic seconds. ``queries`` counts HTTP queries sent (for benchmarks).
    """

    def __init__(
        self,
        client: PromClient,
        nodes: Sequence[Target],
        engines: Sequence[Target],
        *,
        interval_s: float,
        window_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.interval_s = interval_s
        self.window_s = window_s
        self.exprs = {
            "nodes": node_query(nodes) if nodes else "",
            "engines": engine_query(engines, window_s) if engines else "",
        }
        self.queries = 0
        self._clock = clock
        self._answers: dict[str, _Answer] = {}
        self._index: dict[tuple[str, bool], tuple[QueryResult, _Index]] = {}
        """(kind, by whole ``instance``) → the answer indexed: built once per answer."""
        self._hosts: dict[str, str] = {}
        """``instance`` label → its host part: the same few hundred labels every tick."""
        self._users = 0
        self._backoff: dict[str, float] = {}
        """Kind → seconds its refused answer is reused: doubled per refusal, up to
        :data:`BACKOFF_MAX_S` (fetching 30 MB to refuse it again every second cost 0.4 CPU s/s)."""

    @property
    def url(self) -> str:
        return self.client.url

    def attach(self) -> None:
        """A source that will call :meth:`aclose` once."""
        self._users += 1

    async def fetch(self, kind: str) -> QueryResult:
        """This tick's answer for ``kind``; raises :class:`PromFailure` like the query."""
        answer = self._answer(kind)
        if answer.task.done():
            return answer.task.result()
        waiter: asyncio.Future[QueryResult] = asyncio.get_running_loop().create_future()
        answer.waiters.append(waiter)
        return await waiter

    def _answer(self, kind: str) -> _Answer:
        now = self._clock()
        answer = self._answers.get(kind)
        if answer is not None and (not answer.task.done() or now - answer.started < answer.hold_s):
            return answer
        self.queries += 1
        task = asyncio.ensure_future(self.client.query(self.exprs[kind]))
        answer = self._answers[kind] = _Answer(now, task, self.interval_s / 2)
        task.add_done_callback(answer.settle)
        task.add_done_callback(lambda done: self._hold(kind, answer, done))
        return answer

    def _hold(self, kind: str, answer: _Answer, task: asyncio.Future[QueryResult]) -> None:
        """How long ``answer`` is reused: half a poll interval, or for an answer refused as
        over a cap, twice as long as the last refusal's (from one interval, up to a minute)."""
        if _refused(task):
            last = self._backoff.get(kind, max(self.interval_s, 0.5))
            answer.hold_s = self._backoff[kind] = min(BACKOFF_MAX_S, 2 * last)
        else:
            self._backoff.pop(kind, None)

    def next_tick(self) -> None:
        """Forget this tick's answers: the next :meth:`fetch` queries again (benchmarks poll
        back to back, faster than the reuse window)."""
        self._answers.clear()

    def select(self, kind: str, result: QueryResult, target: Target) -> Sequence[Series]:
        """The series of ``result`` (this tick's ``kind`` answer) that belong to ``target`` (not
        to be changed: shared with the index)."""
        if target.match:
            return [s for s in result.series if target.matches(s.labels)]
        key = (kind, target.with_port)
        index = self._index.get(key)
        if index is None or index[0] is not result:
            index = self._index[key] = (result, self._group(result, by_host=not target.with_port))
        return index[1].get(target.instance or "", ())  # the index's own list: never changed

    def _group(self, result: QueryResult, *, by_host: bool) -> _Index:
        """``result``'s series by the host part of ``instance`` or by the whole label."""
        hosts = self._hosts
        if len(hosts) > MAX_INSTANCES:
            hosts.clear()
        groups: _Index = {}
        for s in result.series:
            instance = s.labels.get("instance", "")
            if by_host:
                host = hosts.get(instance)
                if host is None:
                    host = hosts[instance] = host_part(instance)
                instance = host
            group = groups.get(instance)
            if group is None:
                groups[instance] = [s]
            else:
                group.append(s)
        return groups

    async def aclose(self) -> None:
        """Close the connection pool when the last attached source closes."""
        self._users -= 1
        if self._users <= 0:
            for answer in self._answers.values():
                answer.task.cancel()
            await self.client.aclose()


def bearer_token(env: str | None) -> str | None:
    """The token in environment variable ``env`` (None when unset or not configured)."""
    return os.environ.get(env) if env else None
