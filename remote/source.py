"""PromQL over a remote engine: an expression is rendered back to PromQL text and evaluated by
the engine (full PromQL there, and the work lands where the data is), not sample by sample here.

:class:`RemoteSource` is a :class:`promql.SampleSource` (raw samples, for callers that evaluate
locally) whose ``context`` makes a :class:`RemoteContext`: the rules engine, the cost-spike checks
and dashboard expressions all get one through :func:`promql.evaluate.context_at`. ``group_ratio``
is rewritten to standard PromQL on the way (:mod:`promql.promql`), as for the exported rules.
"""

from __future__ import annotations

from promql.ast import Node
from promql.evaluate import EvalContext, Fetched, Value
from promql.lexer import ExprError
from promql.promql import to_promql
from promql.range_funcs import Segments
from promql.sources import labels_of
from remote.client import EngineClient, EngineError
from remote.reader import RemoteReader
from store.series_index import Matcher, Selector


class RemoteSource:
    def __init__(self, client: EngineClient, reader: RemoteReader) -> None:
        self.client = client
        self.reader = reader

    def fetch(self, name: str | None, matchers: tuple[Matcher, ...], start_ms: int, end_ms: int) -> Fetched:
        flat = self.reader.raw_flat(Selector(name, matchers), start_ms + 1, end_ms)
        return Fetched([labels_of(key) for _, key in flat.found], Segments(flat.ts, flat.values, flat.starts, flat.counts))

    def context(self, at_ms: int) -> RemoteContext:
        return RemoteContext(self, at_ms)


class RemoteContext(EvalContext):
    """Evaluates whole expressions in the engine at ``at_ms``; an engine failure becomes an
    :class:`ExprError` naming the engine, so a rule records it as its health and goes on."""

    def __init__(self, source: RemoteSource, at_ms: int) -> None:
        super().__init__(source, at_ms)
        self.remote = source

    def at(self, at_ms: int) -> EvalContext:
        return RemoteContext(self.remote, at_ms)

    def evaluate(self, node: Node) -> Value:
        try:
            return self.remote.client.instant(to_promql(node), self.at_ms)
        except EngineError as exc:
            raise ExprError(str(exc), node.pos) from exc
