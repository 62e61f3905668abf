"""The engine at run time: launchers, the supervisor, probes, log capture and crash classes."""
