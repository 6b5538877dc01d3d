"""The expected row for a live window: the window's load (``load``), weighted medians
(``mixture``), the matched estimate (``matched``) and the profile's curve (``curve``).
"""
