"""The guard's repairs of agent traffic (``[guard.repair]``): each one a module, each off-able.

History hygiene (``hygiene``), tool calls salvaged from leaked markup (``salvage``, and
``stream`` for streamed replies), loops cut (``loops``), stale sessions (``stale``), fair
queues (``queue``) and the byte pre-scan (``prescan``). What was done to a reply is named
by ``Repair`` and counted per session and per key.
"""
