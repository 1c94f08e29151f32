"""Catalog commands (``catalog_discover``)."""
