"""Governed runs: the pure core (``domain``), the transition authority and its outbox, the
engine that advances runs, replay, the console, the callback and health endpoints."""
