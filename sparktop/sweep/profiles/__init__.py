"""Sweep profiles: the data model (``profile``), the file parser (``profile_file``), the
built-ins shipped beside these modules (``*.yaml``), and the importers that turn other tools'
benchmark results into a profile (``import_*``). The bottom layer of :mod:`sparktop.sweep`.
"""
