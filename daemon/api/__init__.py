"""fleetd's API wiring: the HTTP server, the services behind web's routes, the simulation controls."""
