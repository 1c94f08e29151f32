"""The capability runtime (SPEC §3): versioned contracts, one adapter module per capability,
the registry that dispatches them, and the port (``ports``) through which they reach a world."""
