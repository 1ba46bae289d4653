"""Model files: the shared format (format), kernel models (kernel) and linear models (linear)."""
