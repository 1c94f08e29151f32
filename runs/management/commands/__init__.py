"""Run commands operators and scripts use: start_run, timeline, sweep, serve_embedded, db_roles."""
