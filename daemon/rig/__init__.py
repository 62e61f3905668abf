"""fleetd's rig wing: reading the cards and the host, judging them, the Xid path, the history."""
