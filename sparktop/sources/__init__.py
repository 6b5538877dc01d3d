"""Sources: things the poller samples (SSH nodes, the local machine, inference servers)."""
