"""The rig in Prometheus' text format, from the daemon's memory (``GET /metrics``).

Names follow Prometheus' conventions (``cmpfleet_`` prefix, base units: watts, bytes,
hertz, seconds; counters end in ``_total``). Per-card series carry ``gpu`` (the NVML
index), ``uuid`` and ``pci_bus_id``. A reading that is not known (a lost card's power,
an engine that reports no throughput yet) is left out rather than exported as 0, so a
graph shows a gap instead of a false value.

One small prometheus_client collector per concern, each reading its wing's memory at
scrape time through a callable: the cards (``web.metrics_cards``), the rig's own series
and the poll timer (``web.metrics_rig``), the host (``web.metrics_host``), the engine
(``web.metrics_engine``), the canaries (``web.metrics_canaries``), the guard
(``web.metrics_guard``), recovery's latch and drain (``web.metrics_recovery``) and the
crash bundles (``web.metrics_crashes``). The daemon builds one ``CollectorRegistry`` per
app and registers each wing's collector on it where it composes the wings; the route
(``web.routes.metrics``) renders that registry. Nothing is registered globally (two apps
in one test process never share series) and nothing goes stale between scrapes.
"""

from __future__ import annotations

# The classic text format every Prometheus 2.x reads (our names need none of 1.0.0's escaping).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
