"""fleetd's engine wing: the engine service, its profiles, preflight, foreign stops and actions."""
