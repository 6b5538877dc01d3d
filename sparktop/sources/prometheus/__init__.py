"""Nodes and engines read from a Prometheus server: the HTTP API client (:mod:`.api`), the
queries (:mod:`.promql`), one batched query per tick (:mod:`.hub`), the node and engine
sources (:mod:`.node`, :mod:`.engine`) and their construction (:mod:`.build`)."""
