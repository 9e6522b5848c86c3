"""Type stubs for dod.arrow (Cython module): no Python names; cimport dod.arrow."""
