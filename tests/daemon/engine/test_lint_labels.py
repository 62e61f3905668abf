"""The start gate's lint counts the fork's provenance labels a build recorded as evidence
of the fork: an upstream-named image whose build carried ``dsv4.patch-series`` gets the
fork's rules; without the labels it gets the model's only."""

from __future__ import annotations

from daemon.engine.preflight import lint_refusals
from serving.recipe.lint import RigCards
from serving.recipe.recipe import recipe_from_table

UPSTREAM = recipe_from_table(
    {
        "mode": "docker",
        "image": "registry.lan/team/vllm-dsv4:latest",
        "model": "/models/DeepSeek-V4-Flash-0731",
        "shm_size": "16g",
        "pipeline_parallel_size": 4,
        "layer_partition": [12, 12, 12, 7],
        "gpu_memory_utilization": 0.85,
        "extra_args": ["--tool-call-parser", "deepseek_v4", "--reasoning-parser", "deepseek_v4"],
    },
    "upstream",
)
CARDS = RigCards(count=4)


def test_labels_of_the_fork_bring_its_rules_to_the_gate() -> None:
    assert lint_refusals(UPSTREAM, CARDS) == []
    refused = lint_refusals(UPSTREAM, CARDS, {"dsv4.patch-series": "0001-0023"})
    lines = [refusal.message for refusal in refused]
    assert any("[row-chunk-unset]" in line for line in lines), lines
    assert any("[multiproc-method]" in line for line in lines), lines
    assert lint_refusals(UPSTREAM, CARDS, {"org.opencontainers.image.version": "0.12"}) == []
