"""fleetd's bench wing: runs the matrix and the cap sweep, keeps them, writes the report."""
