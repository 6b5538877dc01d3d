"""The main screen's widgets: header, alert bar, nodes table, engines, budget pane, events."""
