"""The model builds the linter has a rule set for, and what identifies each of them.

Most rules the seeds taught are true of one build only (the DeepSeek V4 Flash sm_80 fork's
``DSV4_LOGITS_ROW_CHUNK``, its DSpark drafter, its allocator): applied to every model
they refused working GLM and Qwen launches. So each rule set belongs to a ``Family``; a
recipe names one with ``family``, opts out with ``family = "none"``, or leaves the key
out and the family is inferred from the evidence (``family_evidence``). This module is
the list of builds (a leaf: the recipe model validates ``family`` against it); the rules
themselves are in ``rulesets``.

``layers`` is the build's decoder layer count, used for the partition sum when neither
the checkpoint's ``config.json`` nor the recipe's ``num_layers`` says. ``model_types``
and ``architectures`` are what its checkpoint's ``config.json`` says; ``signs`` are the
flag values and the environment-variable prefix only its build uses. ``checkpoint_bytes``
is the size of the reference checkpoint (for fits-the-cards when the weights cannot be
read here).

The fork's own marks are separate from the model's: ``--tool-call-parser deepseek_v4`` and
``--reasoning-parser deepseek_v4`` name the model (upstream vLLM has them too), while the
fork's own rules (its row-chunk patch, its spawn requirement, its DSpark and memory
findings) need evidence of the fork: its image (``fork_images``, the repository names its
guides build), its environment (``env_prefix``), its provenance labels (``fork_label_prefix``)
or an explicit ``family``.
"""

from __future__ import annotations

from dataclasses import dataclass

# ``family = "none"``: the generic vLLM rules only, whatever the evidence says.
NO_FAMILY = "none"
GIB = 1 << 30


@dataclass(frozen=True)
class Family:
    """One model build with a rule set of its own, and the marks that identify it."""

    name: str
    title: str
    layers: int | None
    model_types: frozenset[str] = frozenset()
    architectures: frozenset[str] = frozenset()
    # Values of --tokenizer-mode, --tool-call-parser, --reasoning-parser only it uses.
    flag_values: frozenset[str] = frozenset()
    # Environment variables its build reads start so (``DSV4_``).
    env_prefix: str | None = None
    checkpoint_bytes: int | None = None
    checkpoint_name: str = ""
    # The fork's image repositories (``dsv4-a100:devel`` is ``dsv4-a100``) and the prefix of
    # the provenance labels its images carry (``dsv4.patch-series``).
    fork_images: frozenset[str] = frozenset()
    fork_label_prefix: str | None = None


# The seeds' reference checkpoint: "about 155.4 GiB (166.9 GB) on disk".
DSV4_FLASH = Family(
    "dsv4-flash",
    "DeepSeek V4 Flash (the sm_80 fork)",
    43,
    model_types=frozenset({"deepseek_v4"}),
    architectures=frozenset({"DeepseekV4ForCausalLM"}),
    flag_values=frozenset({"deepseek_v4"}),
    env_prefix="DSV4_",
    checkpoint_bytes=round(155.4 * GIB),
    checkpoint_name="DeepSeek-V4-Flash-0731",
    fork_images=frozenset({"dsv4-a100"}),
    fork_label_prefix="dsv4.",
)
DSV41_FLASH = Family(
    "dsv41-flash",
    "DeepSeek V4.1 Flash",
    40,
    model_types=frozenset({"deepseek_v41"}),
    architectures=frozenset({"DeepseekV41ForCausalLM"}),
    flag_values=frozenset({"deepseek_v41"}),
    env_prefix="DSV41_",
)

FAMILIES: dict[str, Family] = {family.name: family for family in (DSV4_FLASH, DSV41_FLASH)}


def family_names() -> list[str]:
    """Known family names, sorted (for messages)."""
    return sorted(FAMILIES)
