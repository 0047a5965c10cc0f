"""Public spatial algebra (being written)."""
