"""cmpfleet web package."""
