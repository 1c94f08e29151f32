"""The admission app: capability versions and their lifecycle, discovery from tool servers,
version diffs, admission records and the rejection log."""
