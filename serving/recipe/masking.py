"""Mask secret values before a launch's environment and argv are written to disk.

The launch history is read by anyone who can read the database or call the API (it
feeds ``recipe show --diff``), so a Hugging Face token or an API key must never land in
it. What counts as secret is judged by name, generously: a false positive only hides a
harmless value in a diff.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

MASK = "***"
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Flags such as vLLM's --api-key and --hf-token carry a secret as their value; flags are
# judged word by word so --tokenizer or --max-num-batched-tokens keep their values.
_SECRET_FLAG_WORDS = frozenset({"token", "key", "secret", "password", "passwd", "credential"})


def is_secret_name(name: str) -> bool:
    """True when an environment variable or flag name looks like it holds a secret."""
    return bool(_SECRET_NAME.search(name))


def _is_secret_flag(flag: str) -> bool:
    words = re.split(r"[-_]+", flag.lstrip("-").lower())
    return any(word in _SECRET_FLAG_WORDS for word in words)


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with the values of secret-looking keys replaced by ``***``."""
    return {key: (MASK if is_secret_name(key) else value) for key, value in env.items()}


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A copy of ``argv`` with the values of secret-looking flags replaced by ``***``.

    Handles both ``--api-key VALUE`` and ``--api-key=VALUE``; ``-e NAME=VALUE`` pairs
    (docker/podman environment) are masked by the variable's name.
    """
    masked: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            masked.append(MASK)
            hide_next = False
            continue
        flag, eq, _value = arg.partition("=")
        if flag.startswith("-") and _is_secret_flag(flag):
            if eq:
                masked.append(f"{flag}={MASK}")
            else:
                masked.append(arg)
                hide_next = True
            continue
        if eq and not arg.startswith("-") and flag.isidentifier() and is_secret_name(flag):
            masked.append(f"{flag}={MASK}")
            continue
        masked.append(arg)
    return masked
