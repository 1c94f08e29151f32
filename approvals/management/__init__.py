"""Commands that configure approvals: policies and webhook endpoints."""
