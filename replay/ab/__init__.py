"""A/B comparisons: run order, preflight, resumable state, the demo."""
