"""Triage: each rule of docs/domain.md on the facts that fit it, its evidence named;
``unknown`` (nothing guessed) when none does."""

from __future__ import annotations

import pytest

from serving.evidence.triage import Confidence, Facts, fault_line, rank_in, triage

ILLEGAL = (
    "(Worker_PP3 pid=42) ERROR [multiproc_executor.py:671] RuntimeError: CUDA error: an "
    "illegal memory access was encountered"
)


def kinds(facts: Facts) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for item in triage(facts).evidence:
        found.setdefault(item.kind, []).append(item.value)
    return found


def test_the_depth_wall_names_depth_rank_card_and_the_unset_row_chunk() -> None:
    facts = Facts(
        crash_class="cuda_fault",
        log_tail=("INFO fine", ILLEGAL),
        xids=((31, 3),),
        fault_rank=3,
        fault_card=3,
        pp_size=4,
        depth_tokens=140_000,
        env={"VLLM_PP_LAYER_PARTITION": "12,12,12,7"},
    )
    verdict = triage(facts)
    assert verdict.rule == "row_chunk_unset"
    assert verdict.confidence is Confidence.HIGH
    assert "140,000 tokens" in verdict.summary and "PP rank 3" in verdict.summary
    assert "DSV4_LOGITS_ROW_CHUNK=64" in verdict.advice
    found = kinds(facts)
    assert found["depth"] == ["140,000 tokens"]
    assert found["rank"] == ["PP rank 3 of 4"]
    assert found["card"] == ["card 3"]
    assert found["env"] == ["DSV4_LOGITS_ROW_CHUNK unset"]
    assert found["line"] == [ILLEGAL]
    assert verdict.source


def test_a_row_chunk_of_zero_is_the_same_wall_and_a_dropped_env_is_named() -> None:
    facts = Facts(
        xids=((31, 3),),
        fault_rank=3,
        pp_size=4,
        depth_tokens=150_000,
        env={"DSV4_LOGITS_ROW_CHUNK": "0"},
        dropped_env=(),
    )
    assert triage(facts).rule == "row_chunk_unset"
    dropped = Facts(
        xids=((31, 3),),
        fault_rank=3,
        pp_size=4,
        depth_tokens=150_000,
        dropped_env=("DSV4_LOGITS_ROW_CHUNK",),
    )
    values = kinds(dropped)["env"]
    assert "DSV4_LOGITS_ROW_CHUNK was set at the last good launch" in values


def test_the_row_chunk_set_to_64_is_not_the_depth_wall() -> None:
    facts = Facts(
        xids=((31, 3),),
        fault_rank=3,
        pp_size=4,
        depth_tokens=140_000,
        env={"DSV4_LOGITS_ROW_CHUNK": "64"},
    )
    assert triage(facts).rule == "unknown"


def test_topk_fault_with_row_chunk_128_deep_in_a_chat() -> None:
    facts = Facts(
        crash_class="cuda_fault",
        log_tail=(
            'File "sparse_attn_indexer.py", line 210, in _top_k_per_row_prefill_torch',
            ILLEGAL,
        ),
        fault_rank=2,
        pp_size=4,
        depth_tokens=725_000,
        env={"DSV4_LOGITS_ROW_CHUNK": "128"},
    )
    verdict = triage(facts)
    assert verdict.rule == "topk_row_chunk"
    assert verdict.confidence is Confidence.HIGH
    assert "DSV4_LOGITS_ROW_CHUNK = 128" in kinds(facts)["env"]


def test_sample_tokens_timeout_on_three_cards_is_the_partition() -> None:
    facts = Facts(
        crash_class="rpc_timeout",
        log_tail=("TimeoutError: RPC call to sample_tokens timed out.",),
        pp_size=3,
        card_count=3,
        env={},
    )
    verdict = triage(facts)
    assert verdict.rule == "sample_tokens_partition"
    assert "15,15,13" in verdict.advice
    assert verdict.confidence is Confidence.MEDIUM


def test_an_illegal_access_in_speculative_verify_on_an_untested_card() -> None:
    facts = Facts(
        crash_class="cuda_fault",
        log_tail=(
            '(Worker_PP3 pid=9) ERROR   File "/vllm/v1/sample/rejection_sampler.py", line 184, '
            "in forward (speculative verify)",
            ILLEGAL,
        ),
        xids=((31, 3),),
        fault_rank=3,
        fault_card=3,
        pp_size=4,
        env={"DSV4_LOGITS_ROW_CHUNK": "64"},
        memtested_cards=frozenset({0, 1, 2}),
    )
    verdict = triage(facts)
    assert verdict.rule == "spec_verify_fault"
    assert "memory test of card 3" in verdict.advice and "0007" in verdict.advice
    assert "card 3: no memory test has ever passed" in kinds(facts)["card"]


def test_kv_cache_out_of_memory() -> None:
    facts = Facts(
        crash_class="kv_oom",
        log_tail=("ValueError: No available memory for the cache blocks. Try increasing",),
    )
    verdict = triage(facts)
    assert verdict.rule == "kv_oom"
    assert "max-num-seqs" in verdict.advice and "gpu_memory_utilization" in verdict.advice


def test_only_a_dropped_variable() -> None:
    facts = Facts(crash_class="engine_dead", dropped_env=("VLLM_PP_LAYER_PARTITION",))
    verdict = triage(facts)
    assert verdict.rule == "dropped_env"
    assert "VLLM_PP_LAYER_PARTITION" in verdict.summary


@pytest.mark.parametrize(
    "facts",
    [
        Facts(),
        Facts(crash_class="engine_dead", log_tail=("EngineDeadError",)),
        Facts(xids=((79, 1),), fault_card=1),
    ],
)
def test_no_rule_fits_says_unknown_and_guesses_nothing(facts: Facts) -> None:
    verdict = triage(facts)
    assert verdict.rule == "unknown"
    assert verdict.confidence is Confidence.NONE
    assert not verdict.known


def test_the_fault_line_prefers_the_worker_that_names_its_rank() -> None:
    lines = [ILLEGAL, "RuntimeError: CUDA error: an illegal memory access was encountered"]
    assert fault_line(lines) == ILLEGAL
    assert rank_in(ILLEGAL) == 3
    assert rank_in("(VllmWorker rank=2 pid=1) ERROR") == 2
    assert rank_in("no rank here") is None


def test_a_shard_cut_short_is_the_checkpoint_not_the_card() -> None:
    """safetensors' error while the weights load: the shard, never a memory test of a card."""
    tail = (
        "Loading safetensors checkpoint shards:  58% Completed | 26/46 [00:41<00:30]",
        "(Worker_PP1 pid=77) ERROR [multiproc_executor.py:597] safetensors_rust.SafetensorError:"
        " Error while deserializing header: incomplete metadata, file not fully covered",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    )
    verdict = triage(Facts(crash_class="checkpoint", log_tail=tail))
    assert verdict.rule == "checkpoint_short"
    assert verdict.confidence is Confidence.HIGH
    assert "recipe verify" in verdict.advice
    assert any("file not fully covered" in e.value for e in verdict.evidence)
    # The class alone (the line scrolled out of the tail): the same rule, less sure.
    assert triage(Facts(crash_class="checkpoint")).confidence is Confidence.MEDIUM
    # An engine death without safetensors' words is not this rule's.
    assert triage(Facts(crash_class="engine_dead", log_tail=tail[:1])).rule != "checkpoint_short"
