"""fleetd's canary wing: the engine canaries, their check, log signatures and the memory test."""
