"""cmpfleet serving package."""
