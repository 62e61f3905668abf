"""fleetd's side of recovery's ports: the latch, the engine, the host reboot and the bring-up."""
