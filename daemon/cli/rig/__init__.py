"""fleetctl's rig commands: status, events, check, top, xid, explain, alerts, diag, canary."""
