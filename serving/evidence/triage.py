"""Triage: a bundle's verdict from written-down rules, each naming its evidence.

The rules are the field notes of docs/domain.md ("Crash triage"), each with its source:
a depth wall on the last pipeline rank with the row chunk unset, the top-k prefill fault
at 718-733k tokens with a row chunk of 128, the sample_tokens RPC timeout on 3 cards, an
illegal memory access during speculative verify, a relaunch that dropped an environment
variable, and the KV-cache out-of-memory. A verdict names what it rests on (depth, rank,
card, env, line) and how sure it is; when no rule fits it says ``unknown`` and never
guesses. Pure: the facts in, the verdict out.

The crash class is read as the classifier's enum value only (``serving.runtime.classify``
names the classes; this module never looks at how it decides them).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from serving.runtime.classify import CrashClass

ROW_CHUNK_ENV = "DSV4_LOGITS_ROW_CHUNK"
PARTITION_ENV = "VLLM_PP_LAYER_PARTITION"
# The depth wall with the row chunk unset (seeds: about 134k; one owner's trigger 174k).
ROW_CHUNK_WALL_TOKENS = 134_000
# The top-k prefill fault with a row chunk of 128 in accumulating chats (seeds: 718-733k).
TOPK_WALL_TOKENS = 700_000

_ILLEGAL = re.compile(
    r"illegal memory access|cudaErrorIllegalAddress|unspecified launch failure", re.IGNORECASE
)
_CHECKPOINT = re.compile(
    r"SafetensorError: Error while deserializing header|MetadataIncompleteBuffer"
    r"|incomplete metadata, file not fully covered"
)
_TOPK = re.compile(r"_top_k_per_row_prefill_torch")
_SAMPLE_RPC = re.compile(r"RPC call to sample_tokens timed out")
_SPEC = re.compile(r"speculative|spec_decode|verify|rejection_sampler|dspark|draft", re.IGNORECASE)
_KV_OOM = re.compile(
    r"No available memory for the cache blocks|KV cache is needed, which is larger than"
    r"|CUDA out of memory",
    re.IGNORECASE,
)
# vLLM's worker prefixes: "(Worker_PP3 pid=..)", "(VllmWorker rank=3 pid=..)", "(PP3 ...)".
_RANK = re.compile(r"\((?:\w*?_)?PP(\d+)\b|\bpp_rank[=: ]+(\d+)|\brank[=: ]+(\d+)", re.IGNORECASE)


class Confidence(enum.StrEnum):
    """How sure a verdict is: every fact of its rule seen (high), most of them, or few."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One fact a verdict rests on: what kind (depth, rank, card, env, line, xid) and it."""

    kind: str
    value: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """A rule's answer: its id, one line, what to do, how sure, and on what."""

    rule: str
    summary: str
    advice: str
    confidence: Confidence
    evidence: tuple[Evidence, ...] = ()
    source: str = ""

    @property
    def known(self) -> bool:
        """False for ``unknown``: no rule fitted."""
        return self.rule != UNKNOWN

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (bundle, API, webhook)."""
        doc = asdict(self)
        doc["confidence"] = str(self.confidence)
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Verdict:
        """Back from :meth:`as_dict`."""
        return cls(
            rule=str(doc.get("rule", UNKNOWN)),
            summary=str(doc.get("summary", "")),
            advice=str(doc.get("advice", "")),
            confidence=Confidence(str(doc.get("confidence", "none"))),
            evidence=tuple(
                Evidence(str(item["kind"]), str(item["value"])) for item in doc.get("evidence", ())
            ),
            source=str(doc.get("source", "")),
        )


UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Facts:
    """What triage reads of one bundle.

    ``fault_rank`` is the pipeline rank that faulted (from the fault line's worker prefix,
    else from the Xid's card); ``pp_size`` the pipeline size; ``depth_tokens`` the deepest
    request in flight; ``env`` the launch's environment (masked: only names and non-secret
    values matter here); ``dropped_env`` names set at the last launch that reached ready
    and missing now; ``memtested_cards`` the cards a memory test ever passed on.
    """

    crash_class: str | None = None
    log_tail: tuple[str, ...] = ()
    xids: tuple[tuple[int, int | None], ...] = ()  # (xid, card)
    fault_rank: int | None = None
    fault_card: int | None = None
    pp_size: int | None = None
    card_count: int | None = None
    depth_tokens: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    dropped_env: tuple[str, ...] = ()
    memtested_cards: frozenset[int] = frozenset()
    ready_for_s: float | None = None


def rank_in(line: str) -> int | None:
    """The pipeline rank a worker's log line names, or None."""
    match = _RANK.search(line)
    if match is None:
        return None
    return int(next(group for group in match.groups() if group is not None))


def fault_line(lines: Sequence[str]) -> str | None:
    """The last line that names the fault (illegal access, the RPC timeout, the KV OOM).

    A worker's own line (its rank in the prefix) wins over the API server's echo of it.
    """
    found = [
        line.strip()
        for line in lines
        if _ILLEGAL.search(line) or _SAMPLE_RPC.search(line) or _KV_OOM.search(line)
    ]
    ranked = [line for line in found if rank_in(line) is not None]
    chosen = ranked or found
    return chosen[-1] if chosen else None


def _row_chunk(env: Mapping[str, str]) -> int | None:
    raw = env.get(ROW_CHUNK_ENV)
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None


def _is_class(facts: Facts, crash_class: CrashClass) -> bool:
    return facts.crash_class == crash_class.value


def _common(facts: Facts, line: str | None) -> list[Evidence]:
    found: list[Evidence] = []
    if facts.depth_tokens is not None:
        found.append(Evidence("depth", f"{facts.depth_tokens:,} tokens"))
    if facts.fault_rank is not None:
        last = "" if facts.pp_size is None else f" of {facts.pp_size}"
        found.append(Evidence("rank", f"PP rank {facts.fault_rank}{last}"))
    if facts.fault_card is not None:
        found.append(Evidence("card", f"card {facts.fault_card}"))
    for xid, card in facts.xids:
        found.append(Evidence("xid", f"Xid {xid}" + ("" if card is None else f" on card {card}")))
    if line is not None:
        found.append(Evidence("line", line[:300]))
    return found


def _illegal(facts: Facts) -> bool:
    return (
        _is_class(facts, CrashClass.CUDA_FAULT)
        or any(xid == 31 for xid, _ in facts.xids)
        or any(_ILLEGAL.search(line) for line in facts.log_tail)
    )


def _on_last_rank(facts: Facts) -> bool:
    return (
        facts.fault_rank is not None
        and facts.pp_size is not None
        and facts.fault_rank == facts.pp_size - 1
    )


def rule_row_chunk_unset(facts: Facts) -> Verdict | None:
    """Xid 31 / illegal access on the last rank past ~134k tokens, the row chunk unset."""
    chunk = _row_chunk(facts.env)
    if not _illegal(facts) or chunk not in (None, 0):
        return None
    deep = facts.depth_tokens is not None and facts.depth_tokens >= ROW_CHUNK_WALL_TOKENS
    if not deep and not _on_last_rank(facts):
        return None
    evidence = _common(facts, fault_line(facts.log_tail))
    evidence.append(Evidence("env", f"{ROW_CHUNK_ENV} " + ("unset" if chunk is None else "= 0")))
    if ROW_CHUNK_ENV in facts.dropped_env:
        evidence.append(Evidence("env", f"{ROW_CHUNK_ENV} was set at the last good launch"))
    confidence = Confidence.HIGH if deep and _on_last_rank(facts) else Confidence.MEDIUM
    where = f" at {facts.depth_tokens:,} tokens" if facts.depth_tokens is not None else ""
    rank = f" on PP rank {facts.fault_rank}" if facts.fault_rank is not None else ""
    return Verdict(
        "row_chunk_unset",
        f"depth wall{where}{rank}: the logits row chunk is unset (the ~134k-token Xid 31)",
        f"set {ROW_CHUNK_ENV}=64 in the recipe's [env] and relaunch",
        confidence,
        tuple(evidence),
        "seeds: Xid 31 at the first request past ~134k tokens with the row chunk unset; "
        "tim-odonnell TROUBLESHOOTING-XID31.md (~174k)",
    )


def rule_topk_row_chunk_128(facts: Facts) -> Verdict | None:
    """Illegal access in ``_top_k_per_row_prefill_torch`` deep in a chat, row chunk 128."""
    chunk = _row_chunk(facts.env)
    topk = next((line.strip() for line in reversed(facts.log_tail) if _TOPK.search(line)), None)
    deep = facts.depth_tokens is not None and facts.depth_tokens >= TOPK_WALL_TOKENS
    if not _illegal(facts) or chunk is None or chunk <= 64 or (topk is None and not deep):
        return None
    evidence = _common(facts, topk or fault_line(facts.log_tail))
    evidence.append(Evidence("env", f"{ROW_CHUNK_ENV} = {chunk}"))
    confidence = Confidence.HIGH if topk is not None and deep else Confidence.MEDIUM
    return Verdict(
        "topk_row_chunk",
        f"top-k prefill fault with row chunk {chunk}"
        + (f" at {facts.depth_tokens:,} tokens" if facts.depth_tokens is not None else ""),
        f"set {ROW_CHUNK_ENV}=64 (accumulating chats die at ~718-733k with {chunk})",
        confidence,
        tuple(evidence),
        "seeds: illegal memory access in _top_k_per_row_prefill_torch at 718-733k tokens in "
        "chats, always on the same PP rank, with row chunk 128 (64 fixes it)",
    )


def rule_sample_tokens_partition(facts: Facts) -> Verdict | None:
    """The sample_tokens RPC timeout on 3 cards: the layer partition."""
    line = next(
        (line.strip() for line in reversed(facts.log_tail) if _SAMPLE_RPC.search(line)), None
    )
    if line is None:
        return None
    cards = facts.pp_size or facts.card_count
    evidence = _common(facts, line)
    partition = facts.env.get(PARTITION_ENV)
    evidence.append(
        Evidence("env", f"{PARTITION_ENV} = {partition}" if partition else f"{PARTITION_ENV} unset")
    )
    three = cards == 3
    return Verdict(
        "sample_tokens_partition",
        "sample_tokens RPC timed out"
        + (" on 3 cards" if three else "")
        + ": the layer partition does not fit the last rank",
        f"set {PARTITION_ENV} for the card count (3 cards: 15,15,13; the last rank carries "
        "lm_head and the drafter)",
        Confidence.MEDIUM if three and not partition else Confidence.LOW,
        tuple(evidence),
        'seeds: 3-card V4 "RPC call to sample_tokens timed out" on the first token; '
        "deepseek-v4-cmp170hx README (VLLM_PP_LAYER_PARTITION=15,15,13)",
    )


def rule_spec_verify(facts: Facts) -> Verdict | None:
    """An illegal access during speculative verify: a card fault or the NaN-logit patch."""
    if not _illegal(facts):
        return None
    line = next(
        (
            line.strip()
            for line in reversed(facts.log_tail)
            if _SPEC.search(line) and (_ILLEGAL.search(line) or "verify" in line.lower())
        ),
        None,
    )
    if line is None:
        return None
    evidence = _common(facts, line)
    card = facts.fault_card
    untested = card is not None and card not in facts.memtested_cards
    if untested:
        evidence.append(Evidence("card", f"card {card}: no memory test has ever passed"))
    test = f"run a stress memory test of card {card}" if card is not None else "run a memory test"
    return Verdict(
        "spec_verify_fault",
        "illegal memory access during speculative verify"
        + (f" on PP rank {facts.fault_rank}" if facts.fault_rank is not None else ""),
        f"{test} (fleetctl diag memtest); if it passes, check the build has the NaN-logit "
        "guard (patch 0007)",
        Confidence.MEDIUM if untested else Confidence.LOW,
        tuple(evidence),
        "seeds: a daily illegal memory access on rank 3 during DSpark verify on a rig never "
        "memtested; patch 0007 (NaN to -inf before argmax, vLLM #50183)",
    )


def rule_kv_oom(facts: Facts) -> Verdict | None:
    """The KV cache ran out of memory."""
    line = next((line.strip() for line in reversed(facts.log_tail) if _KV_OOM.search(line)), None)
    if not _is_class(facts, CrashClass.KV_OOM) and line is None:
        return None
    return Verdict(
        "kv_oom",
        "the KV cache ran out of memory",
        "lower --max-num-seqs, or lower gpu_memory_utilization to leave the activations "
        "their margin (or max_model_len)",
        Confidence.HIGH if line is not None else Confidence.MEDIUM,
        tuple(_common(facts, line)),
        'vLLM: "No available memory for the cache blocks" / CUDA out of memory',
    )


def rule_checkpoint_short(facts: Facts) -> Verdict | None:
    """A shard of the checkpoint could not be read: the weights, not the cards."""
    line = next(
        (line.strip() for line in reversed(facts.log_tail) if _CHECKPOINT.search(line)), None
    )
    if not _is_class(facts, CrashClass.CHECKPOINT) and line is None:
        return None
    return Verdict(
        "checkpoint_short",
        "a checkpoint shard could not be read while the weights loaded (cut short, or not a "
        "safetensors file)",
        "run fleetctl recipe verify: it names the shard; copy that shard again. The start's "
        'preflight ([serving] verify_checkpoint = "quick") refuses such a start before any '
        "card is touched",
        Confidence.HIGH if line is not None else Confidence.MEDIUM,
        tuple(_common(facts, line)),
        "safetensors' MetadataIncompleteBuffer ('incomplete metadata, file not fully covered'); "
        "club-170hx's shard manifest gate",
    )


def rule_dropped_env(facts: Facts) -> Verdict | None:
    """The launch lost an environment variable the last good launch had."""
    if not facts.dropped_env:
        return None
    names = ", ".join(facts.dropped_env)
    evidence = [
        Evidence("env", f"{name} set at the last good launch, missing now")
        for name in facts.dropped_env
    ]
    evidence += _common(facts, fault_line(facts.log_tail))
    return Verdict(
        "dropped_env",
        f"this launch dropped {names}, set at the last launch that reached ready",
        f"put {names} back in the recipe's [env] (fleetctl recipe show --diff)",
        Confidence.MEDIUM,
        tuple(evidence),
        "seeds: a relaunch silently dropped the row-chunk env and its owner blamed the wrong cause",
    )


RULES: tuple[Callable[[Facts], Verdict | None], ...] = (
    rule_checkpoint_short,
    rule_kv_oom,
    rule_topk_row_chunk_128,
    rule_row_chunk_unset,
    rule_sample_tokens_partition,
    rule_spec_verify,
    rule_dropped_env,
)
RULE_IDS = (
    "checkpoint_short",
    "kv_oom",
    "topk_row_chunk",
    "row_chunk_unset",
    "sample_tokens_partition",
    "spec_verify_fault",
    "dropped_env",
    UNKNOWN,
)


def triage(facts: Facts) -> Verdict:
    """The first rule that fits, in order; ``unknown`` (nothing guessed) when none does."""
    for rule in RULES:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    return Verdict(
        UNKNOWN,
        "no triage rule fits this crash",
        "read the bundle's engine log and kernel-log window (fleetctl crash show ID)",
        Confidence.NONE,
        tuple(_common(facts, fault_line(facts.log_tail))),
    )
