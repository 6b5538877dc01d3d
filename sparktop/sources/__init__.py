"""Sources: things the poller samples (SSH nodes, the local machine, inference servers).

One package per transport, layered (``lint-imports`` holds it, higher may import lower):
``build`` → ``local`` | ``ssh`` | ``prometheus`` → ``engines`` | ``nvsmi`` →
``host`` | ``exposition`` → ``probe``.

- ``probe``: the fixed remote commands and their output markers (SSH source ↔ simulator).
- ``exposition``: the Prometheus text-format reader (bounded parse → ``PromPage``).
- ``host``: the host files (PSI, uptime, RDMA ports, hwmon) and their rates.
- ``nvsmi``: nvidia-smi CSV and the probe's output → ``NodeSample``.
- ``engines``: an inference server over HTTP (``/metrics``, ``/v1/models``…), its page read
  into per-rank readings and derived over a window; ``engines/kinds/`` declares each kind.
- ``ssh``: a node over SSH (one-shot and streaming probe, host keys, bounded output).
- ``prometheus``: nodes and engines read from a Prometheus server's HTTP API.
- ``local``: this machine through NVML; ``build``: every source of an inventory.
"""
