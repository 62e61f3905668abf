"""fleetd's crash black box: a bundle before every stop, the last good boot, the triage."""
