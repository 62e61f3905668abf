"""cmpfleet daemon package."""
