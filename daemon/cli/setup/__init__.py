"""fleetctl init: the rig's config and its host baseline."""
