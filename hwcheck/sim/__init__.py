"""The simulated rig: scenarios, the simulated host and its ``GpuBackend``, fault injection.

``--simulate NAME`` loads a scenario (``hwcheck.sim.scenario``), builds a
``SimulatedRig`` (``hwcheck.sim.rig``) on the state dir and hands its ``host_sources()``
to the same code that reads a real host. Import from the submodules.
"""
