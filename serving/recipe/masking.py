"""Mask secret values before anything fleetd writes or serves shows a launch.

A launch's argv and environment reach the engine log's launch header (served to any
local user before), the launch history in ``fleet.db``, the events and the API's recipe
document; a Hugging Face token, an API key or a database password must reach none of
them. Three rules, judged generously (a false positive only hides a harmless value):

- a flag that carries a secret: the known ones (``--api-key``, ``--hf-token``, ...) and
  any flag with a word such as ``token``/``key``/``secret``/``password`` in its name,
  written ``--flag VALUE`` or ``--flag=VALUE``;
- an environment variable whose name looks secret (``HF_TOKEN``), in ``env`` or passed to
  a container as ``-e``/``--env NAME=VALUE``;
- the password of a URL (``scheme://user:PASSWORD@host``, or a ``password=``/``token=``
  query parameter) in any value or argument, whatever its name (``DATABASE_URL``,
  ``--redis-url``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

from serving.recipe.flags import FlagOverride
from serving.recipe.spec import LaunchSpec

MASK = "***"
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Flags known to carry a secret as their value (vLLM, Hugging Face and common servers).
KNOWN_SECRET_FLAGS: frozenset[str] = frozenset(
    {
        "--api-key",
        "--hf-token",
        "--token",
        "--auth-token",
        "--password",
        "--ssl-keyfile-password",
        "--openai-api-key",
    }
)
# Other flags are judged word by word, so --tokenizer or --max-num-batched-tokens keep
# their values while --my-secret or --s3-access-key lose theirs.
_SECRET_FLAG_WORDS = frozenset({"token", "key", "secret", "password", "passwd", "credential"})
# Container runtime options whose value is ``NAME=VALUE`` (judged by NAME).
_ENV_OPTIONS = frozenset({"-e", "--env"})
# scheme://user:PASSWORD@host: the password runs up to the last "@" before the path.
# Up to the last ``@`` before a blank: a password with an unescaped ``/`` is still hidden.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@]*(?=@)")
# libpq and most clients also take a password (or token) as a query parameter.
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&;](?:password|passwd|pwd|sslpassword|secret|token|access_token|api_?key)=)"
    r"[^&#\s]*",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """True when an environment variable or flag name looks like it holds a secret."""
    return bool(_SECRET_NAME.search(name))


def is_secret_flag(flag: str) -> bool:
    """True for a flag whose value is a secret (known, or by a word of its name)."""
    normalized = "--" + flag.lstrip("-").replace("_", "-").lower()
    if normalized in KNOWN_SECRET_FLAGS:
        return True
    words = re.split(r"[-_]+", flag.lstrip("-").lower())
    return any(word in _SECRET_FLAG_WORDS for word in words)


def mask_url_passwords(text: str) -> str:
    """``text`` with every URL password (``scheme://user:PASSWORD@``, ``?password=``) masked."""
    masked = _URL_PASSWORD.sub(lambda match: match.group("head") + MASK, text)
    if "://" not in masked:
        return masked
    return _QUERY_SECRET.sub(lambda match: match.group("head") + MASK, masked)


def _mask_assignment(assignment: str) -> str:
    """``NAME=VALUE`` with VALUE masked when NAME looks secret (URL passwords always)."""
    name, eq, _value = assignment.partition("=")
    if eq and is_secret_name(name):
        return f"{name}={MASK}"
    return mask_url_passwords(assignment)


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env``: secret-looking names masked whole, URL passwords in any value."""
    return {
        key: (MASK if is_secret_name(key) else mask_url_passwords(value))
        for key, value in env.items()
    }


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A copy of ``argv`` with secret values replaced by ``***``.

    Handles ``--api-key VALUE`` and ``--api-key=VALUE``, ``-e NAME=VALUE``,
    ``--env NAME=VALUE`` and ``--env=NAME=VALUE``. Masking a masked argv changes nothing,
    so stored (masked) launches compare equal to a fresh mask of the same launch.
    """
    masked: list[str] = []
    hide_next = False
    assignment_next = False
    for arg in argv:
        if hide_next:
            masked.append(MASK)
            hide_next = False
            continue
        if assignment_next:
            masked.append(_mask_assignment(arg))
            assignment_next = False
            continue
        flag, eq, value = arg.partition("=")
        if flag in _ENV_OPTIONS:
            if eq:
                masked.append(f"{flag}={_mask_assignment(value)}")
            else:
                masked.append(arg)
                assignment_next = True
            continue
        if flag.startswith("-") and is_secret_flag(flag):
            if eq:
                masked.append(f"{flag}={MASK}")
            else:
                masked.append(arg)
                hide_next = True
            continue
        if eq and not arg.startswith("-") and flag.isidentifier() and is_secret_name(flag):
            masked.append(f"{flag}={MASK}")
            continue
        masked.append(mask_url_passwords(arg))
    return masked


def mask_spec(spec: LaunchSpec) -> LaunchSpec:
    """``spec`` as it may be served: argv, environment and preset overrides masked."""
    overrides = tuple(
        FlagOverride(
            item.flag,
            tuple(mask_argv(item.preset_tokens)),
            tuple(mask_argv(item.recipe_tokens)),
        )
        for item in spec.preset_overrides
    )
    return dataclasses.replace(
        spec,
        argv=tuple(mask_argv(spec.argv)),
        env=mask_env(spec.env),
        preset_overrides=overrides,
    )
