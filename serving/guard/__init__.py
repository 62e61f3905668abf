"""The traffic guard: an OpenAI-compatible pass-through that agents call instead of the engine.

It pins request fields (``pinning``), mirrors the reasoning field (``mirror``), caps the
context (``cap``), watches replies with the shared detectors (``watch``, ``sessions``),
accounts tokens per client key (``keys``, ``stats``) and answers OpenAI-format errors
(``errors``), while streaming each chunk as it arrives (``app``, ``upstream``). It runs as
its own process (``python -m serving.guard``), started and restarted by fleetd
(``process``, ``supervisor``), so client traffic never delays a poll, an Xid or a recovery
move; fleetd reads its counters over a loopback control socket (``control``).
"""
