"""fleetctl's fleet commands: every rig of the fleet file from one shell."""
