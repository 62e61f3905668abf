"""``vllm serve`` flags the linter knows, to catch a misspelt one before a cold start.

vLLM refuses an unknown flag only after the container or process has started, and forks
add flags of their own, so an unknown flag is not itself a finding: one that is a near
miss of a known flag (``--gpu-memory-utilisation``) is, with the flag it resembles. The
list is vLLM's engine and OpenAI-server arguments of the 0.10 to 0.12 series (names as
``--help`` prints them; ``_`` and ``-`` are the same to vLLM).
"""

from __future__ import annotations

import difflib

from serving.recipe.flags import normalize_flag

KNOWN_FLAGS: frozenset[str] = frozenset(
    {
        "--allowed-local-media-path",
        "--api-key",
        "--async-scheduling",
        "--attention-backend",
        "--block-size",
        "--calculate-kv-scales",
        "--chat-template",
        "--chat-template-content-format",
        "--code-revision",
        "--collect-detailed-traces",
        "--compilation-config",
        "--config",
        "--cpu-offload-gb",
        "--cuda-graph-sizes",
        "--data-parallel-size",
        "--disable-cascade-attn",
        "--disable-custom-all-reduce",
        "--disable-fastapi-docs",
        "--disable-frontend-multiprocessing",
        "--disable-log-requests",
        "--disable-log-stats",
        "--disable-sliding-window",
        "--distributed-executor-backend",
        "--download-dir",
        "--dtype",
        "--enable-auto-tool-choice",
        "--enable-chunked-prefill",
        "--enable-expert-parallel",
        "--enable-lora",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--enable-reasoning",
        "--enable-request-id-headers",
        "--enable-server-load-tracking",
        "--enable-sleep-mode",
        "--enforce-eager",
        "--generation-config",
        "--gpu-memory-utilization",
        "--guided-decoding-backend",
        "--hf-config-path",
        "--hf-overrides",
        "--hf-token",
        "--host",
        "--ipc",
        "--kv-cache-dtype",
        "--kv-cache-memory",
        "--kv-transfer-config",
        "--limit-mm-per-prompt",
        "--load-format",
        "--log-level",
        "--logits-processors",
        "--long-prefill-token-threshold",
        "--lora-modules",
        "--max-cpu-loras",
        "--max-log-len",
        "--max-logprobs",
        "--max-lora-rank",
        "--max-loras",
        "--max-model-len",
        "--max-num-batched-tokens",
        "--max-num-partial-prefills",
        "--max-num-seqs",
        "--max-parallel-loading-workers",
        "--max-seq-len-to-capture",
        "--middleware",
        "--mm-processor-kwargs",
        "--model",
        "--model-impl",
        "--no-enable-chunked-prefill",
        "--no-enable-flashinfer-autotune",
        "--no-enable-prefix-caching",
        "--no-trust-remote-code",
        "--num-gpu-blocks-override",
        "--num-scheduler-steps",
        "--otlp-traces-endpoint",
        "--override-generation-config",
        "--override-neuron-config",
        "--pipeline-parallel-size",
        "--port",
        "--prefix-caching-hash-algo",
        "--preemption-mode",
        "--quantization",
        "--reasoning-parser",
        "--response-role",
        "--return-tokens-as-token-ids",
        "--revision",
        "--root-path",
        "--rope-scaling",
        "--rope-theta",
        "--scheduler-delay-factor",
        "--scheduling-policy",
        "--seed",
        "--served-model-name",
        "--speculative-config",
        "--ssl-ca-certs",
        "--ssl-certfile",
        "--ssl-keyfile",
        "--swap-space",
        "--task",
        "--tensor-parallel-size",
        "--tokenizer",
        "--tokenizer-mode",
        "--tokenizer-pool-size",
        "--tokenizer-revision",
        "--tool-call-parser",
        "--tool-parser-plugin",
        "--trust-remote-code",
        "--uds",
        "--uvicorn-log-level",
        "--worker-cls",
    }
)

# A near miss: close enough to be a typo, far enough that a fork's own flag is left alone.
TYPO_CUTOFF = 0.88


def near_miss(flag: str) -> str | None:
    """The known flag ``flag`` most likely misspells, or None (known, or nothing close)."""
    name = normalize_flag(flag)
    if not name.startswith("--") or name in KNOWN_FLAGS:
        return None
    close = difflib.get_close_matches(name, sorted(KNOWN_FLAGS), n=1, cutoff=TYPO_CUTOFF)
    return close[0] if close else None
