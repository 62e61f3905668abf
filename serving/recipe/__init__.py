"""Recipe authoring: the launch recipe, its presets, the linter and the build into a spec.

Nothing here starts a process; the runtime takes the ``LaunchSpec`` this package builds.
"""
