"""The last good boot: vLLM's KV pool lines read, a drop beyond the threshold named."""

from __future__ import annotations

from serving.evidence.kvpool import BootFingerprint, CardAtReady, compare, drop_pct, kv_pool_of


def fingerprint(
    kv_tokens: int,
    card3_mib: int = 65536,
    partition: str | None = "12,12,12,7",
    driver: str = "580.95.05",
) -> BootFingerprint:
    cards = tuple(
        CardAtReady(i, f"SER{i}", 65536 if i != 3 else card3_mib, 50_000) for i in range(4)
    )
    return BootFingerprint(
        "abc", "2026-12-01T00:00:00+00:00", kv_tokens, 6.1, cards, partition, driver, "6.8.0-45"
    )


def test_the_lines_vllm_prints_at_the_end_of_profiling() -> None:
    lines = [
        "INFO 12-06 04:53:48 [kv_cache_utils.py:1087] GPU KV cache size: 797,299 tokens",
        "INFO 12-06 04:53:48 [kv_cache_utils.py:1087] Maximum concurrency for 131,072 tokens "
        "per request: 6.08x",
    ]
    assert kv_pool_of(lines) == (797_299, 6.08)


def test_num_gpu_blocks_times_the_block_size_without_the_tokens_line() -> None:
    assert kv_pool_of(['cache_config_info{num_gpu_blocks="3120"} 1.0'], 256) == (798_720, None)
    assert kv_pool_of(["nothing here"], 256) == (None, None)


def test_a_drop_beyond_the_threshold_names_the_card_that_reports_less() -> None:
    good = fingerprint(1_476_563)
    now = fingerprint(1_300_000, card3_mib=61440)
    [warning] = compare(now, good, 5.0)
    assert "1,300,000" in warning and "1,476,563" in warning
    assert "card 3 (serial SER3) reports 61,440 MiB, was 65,536 MiB" in warning


def test_a_driver_change_and_a_new_partition_are_named() -> None:
    good = fingerprint(1_476_563)
    now = fingerprint(798_660, partition=None, driver="590.10")
    [warning] = compare(now, good, 5.0)
    assert "driver changed 580.95.05 -> 590.10" in warning
    assert "layer partition changed 12,12,12,7 -> even" in warning


def test_within_the_threshold_or_without_a_good_boot_nothing_is_said() -> None:
    good = fingerprint(1_000_000)
    assert compare(fingerprint(960_000), good, 5.0) == ()
    assert compare(fingerprint(500_000), None, 5.0) == ()
    assert drop_pct(100, 120) == 0.0


def test_the_fingerprint_round_trips_through_its_json_form() -> None:
    good = fingerprint(1_476_563)
    again = BootFingerprint.from_dict(good.as_dict())
    assert again == good
    assert good.as_dict()["last_rank_free_mib"] == 65536 - 50_000
