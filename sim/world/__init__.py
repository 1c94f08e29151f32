"""The deterministic world double (Django app label ``world``): equipment, manuals, inventory,
the authoritative effect ledger with idempotency and fencing, the fault schedule."""
