"""qloop-kernel."""
