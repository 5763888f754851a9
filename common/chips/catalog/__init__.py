"""The hardware catalog's data, one module per vendor (``common.chips`` aggregates and looks them up).

Every number in these files has a source (``sources`` keys) or is an ``Estimate`` with its derivation.
"""
