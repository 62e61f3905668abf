"""cmpfleet hwcheck package."""
