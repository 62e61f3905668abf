"""fleetctl's terminal drawing: lines that fit the screen, a rig's picture, live views."""
