"""Measuring a profile: ``sparktop sweep``'s client, prompts, cells, run state and runner
(``bench_*``, ``sweep_*``), and a profile learnt from a recording (``learn``), which shares
the cells' statistics.
"""
