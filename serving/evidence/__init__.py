"""Evidence before a stop: the crash bundle, the last good boot and the triage over them."""
