"""fleetctl's engine commands: start, stop, restart, logs, profiles, serve, recipe, reboot."""
