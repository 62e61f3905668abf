"""Host truth: the boot chain, driver module and PCI bus a CMP rig silently depends on.

Small readers over real files (each takes a root path, so tests point it at a recorded
tree), the facts they return (``model``), the baseline ``fleetctl init`` records and the
config pins by hand (``baseline``), and the counter windows that turn PCIe error counters
into rates (``counters``). The checks that judge drift live in ``hwcheck.checks``.
"""
