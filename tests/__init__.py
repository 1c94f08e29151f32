"""The test suite; it mirrors the source tree. ``tests/domain`` is the pure tier (no database:
``make test-fast``); the rest runs on PostgreSQL and, where portable, on SQLite."""
