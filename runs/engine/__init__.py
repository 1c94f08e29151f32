"""The only I/O loop: ownership leases, the runner and its steps, the effect path and its
reconciliation, the executor (in-process or Celery), the sweeper, the Celery tasks."""
