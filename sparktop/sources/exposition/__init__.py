"""The Prometheus text exposition format, read within bounds: the grammar (:mod:`.grammar`),
the fast line runs (:mod:`.runs`), the parser (:mod:`.text`) and the page it gives
(:mod:`.page`: ``PromPage`` of ``PromSample``)."""
