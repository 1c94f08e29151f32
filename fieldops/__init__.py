"""FieldOps: an operations console that governs AI-agent runs."""
