"""The console's pages about runs, one module of views and one of reads per page family:
runs, recovery, runbooks, decision replay."""
