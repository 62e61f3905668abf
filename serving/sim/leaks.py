"""``--sim-leak-mode``: the leaks the seeds report, so each of the guard's repairs has a source.

Markup variants (a tool request's call written as text instead of ``tool_calls``):
``wrapper`` (``<\uff5cDSML\uff5ctool_calls>``, as ``--sim-leak-dsml``), ``orphan`` (an invoke
with no wrapper, Schaka 0009), ``underscore`` (the ``_tool_calls`` wrapper, 0018),
``calls`` and ``_calls`` (the near-miss wrappers, Zanooda v41/0012), ``hybrid`` (a plain XML
``<invoke>`` closed in DSML, v41/0014), ``fused`` (the tool's name fused into a
``<parameter>`` opener, v41/0014) and ``headless`` (parameters with no invoke, v41/0017).
``reasoning`` leaks the reasoning and its end tag into ``content``; ``empty-think`` puts an
empty think block before the answer.
"""

from __future__ import annotations

from collections.abc import Mapping

DSML = "<\uff5cDSML\uff5c"
DSML_CLOSE = "</\uff5cDSML\uff5c"
MARKUP_MODES = ("wrapper", "orphan", "underscore", "calls", "_calls", "hybrid", "fused", "headless")
LEAK_MODES = ("", *MARKUP_MODES, "reasoning", "empty-think")


def _params(arguments: Mapping[str, object]) -> str:
    return "".join(
        f'{DSML}parameter name="{key}" string="true">{value}{DSML_CLOSE}parameter>\n'
        for key, value in arguments.items()
    )


def markup(mode: str, name: str, arguments: Mapping[str, object]) -> str:
    """The call to ``name`` as the build leaks it in ``mode`` (one of ``MARKUP_MODES``)."""
    params = _params(arguments)
    invoke = f'{DSML}invoke name="{name}">\n{params}{DSML_CLOSE}invoke>'
    wrappers = {"wrapper": "tool_calls", "underscore": "_tool_calls", "calls": "calls"}
    wrappers["_calls"] = "_calls"
    if mode in wrappers:
        wrapper = wrappers[mode]
        return f"{DSML}{wrapper}>\n{invoke}\n{DSML_CLOSE}{wrapper}>"
    if mode == "orphan":
        return invoke
    if mode == "hybrid":
        plain = "".join(
            f'<parameter name="{key}">{value}</parameter>\n' for key, value in arguments.items()
        )
        return f'<invoke name="{name}">\n{plain}{DSML_CLOSE}invoke>'
    if mode == "fused":
        return f'<parameter name="{name}">\n{params}{DSML_CLOSE}invoke>'
    if mode == "headless":
        return f"{params}{DSML_CLOSE}invoke>"
    raise ValueError(f"not a markup leak mode: {mode!r}")
