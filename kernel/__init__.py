"""The shared, pure vocabulary every package may use: canonical JSON and content hashes,
the seeded clock, the race-retry helper."""
