"""Small template helpers of the console (world labels, refs, durations, JSON)."""
