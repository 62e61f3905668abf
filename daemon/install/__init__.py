"""``fleetd install`` / ``fleetd uninstall``: the system service from the installed package.

The unit (``fleetd.service``, its canonical copy; ``systemd/fleetd.service`` in the
checkout links here) and the example config ship inside the wheel, so ``pipx install
cmpfleet`` (or a venv) plus ``sudo fleetd install`` sets up a rig with no checkout.
"""
