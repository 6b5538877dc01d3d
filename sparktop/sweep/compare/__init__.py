"""Two profiles side by side, cell by cell, against the noise a sweep's runs show
(``profiles --compare``, ``sweep --compare-to``).
"""
