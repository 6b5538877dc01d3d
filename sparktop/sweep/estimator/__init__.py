"""The estimator: a profile's rows and fitted models turned into expected TTFT, prefill,
decode and aggregate figures with a band (``estimator``; the fits in ``surface`` and
``fitmath``; leave-one-out in ``validate``). Reads profiles only.
"""
