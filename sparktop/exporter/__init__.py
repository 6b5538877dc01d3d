"""sparktop as a Prometheus exporter: its judgements as series (Textual-free)."""
