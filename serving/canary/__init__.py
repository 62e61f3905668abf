"""Engine canaries: small requests that check what the engine says, not only that it answers.

Prompt builders and scorers are pure (``copy``, ``toolcall``, ``reasoning``,
``throughput``); ``client`` speaks the engine's OpenAI-compatible API behind a small
protocol; ``suite`` runs one round; ``signatures`` counts non-fatal log signatures.
"""
