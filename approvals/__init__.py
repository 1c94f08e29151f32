"""Exact approvals (SPEC §4): checkpoints, decisions bound to a proposal hash, their pure
binding rules (``domain``), writes (``services``), reads (``selectors``) and pages."""
