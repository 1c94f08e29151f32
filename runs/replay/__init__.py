"""Replay (SPEC §6): audit replay of stored events, decision replay against a candidate
policy, and the exactly-once audit of a run's effects."""
