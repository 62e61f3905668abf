"""Alerting: rules that turn events into alerts, the durable outbox's senders, and formats.

``rules`` (events and state -> fire/resolve signals), ``engine`` (applies them through
the store, which keeps alerts and the outbox), ``formats`` (json, alertmanager, slack,
discord, alertmanager_api bodies), ``signing`` (the HMAC header), ``sinks`` (configured
webhooks), ``sender`` (one delivery thread per sink) and ``service`` (the whole, as
fleetd starts and stops it and as the API reaches it).
"""
