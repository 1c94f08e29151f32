"""The pure tier: tests that need no database or service (``make test-fast``), mirroring the
packages they test."""
