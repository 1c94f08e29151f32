"""The JSON API for integrations (/api/v1/, OpenAPI at /api/v1/schema/) and its per-user
API tokens (hashed at rest, created and revoked by their user in the console)."""
