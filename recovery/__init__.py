"""cmpfleet recovery package."""
