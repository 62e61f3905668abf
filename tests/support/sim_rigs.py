"""The simulated rig's test factory type (the ``make_rig`` fixture of tests/sim)."""

from __future__ import annotations

from collections.abc import Callable

from hwcheck.sim.rig import SimulatedRig

RigFactory = Callable[..., SimulatedRig]
