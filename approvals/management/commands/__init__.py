"""approvals_policy, approvals_webhook."""
