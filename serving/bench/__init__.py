"""The bench: a matrix of load against the engine in service, measured the way recipes are."""
