"""Mask secret values before anything fleetd writes or serves shows a launch or its output.

A launch's argv and environment reach the engine log's launch header, the launch history
in ``fleet.db``, the events and the API's recipe document; the engine's own output (vLLM
prints its non-default arguments at start) reaches the log API, its streams, the status
document and, through crash evidence, events and alerts. A Hugging Face token, an API key
or a database password must reach none of them. The rules:

- a flag that carries a secret: the known ones (``--api-key``, ``--hf-token``, ...) and
  any flag with a word such as ``token``/``key``/``secret``/``password`` in its name,
  written ``--flag VALUE`` or ``--flag=VALUE``;
- an environment variable whose name *ends* in a secret word (``HF_TOKEN``, ``MYSQL_PWD``,
  ``REDIS_PASS``, ``OPENAI_API_KEY``) or holds an ``AUTH`` word (``AUTH_HEADER``), in
  ``env`` or passed to a container as ``-e``/``--env NAME=VALUE``. A name that merely
  contains a word (``VLLM_MIN_THINKING_TOKENS``, ``TOKENIZERS_PARALLELISM``, ``KEY_FILE``)
  is a setting, shown in clear: hiding it would hide the launch's real knobs and make
  fleetd warn about a secret that is not there;
- in any value, argument or line, whatever its name: the password of a URL
  (``scheme://user:PASSWORD@host``, up to the last ``@`` before the host, so a password
  holding an unescaped ``@`` or ``/`` is hidden whole), a ``password=``/``token=`` query
  parameter, and a bearer credential (``Bearer ...``, ``Authorization: ...``);
- in the engine's output, every value the rules above hid from its launch, and the
  secrets fleetd itself holds (``KnownSecrets``): vLLM echoes ``--api-key`` as
  ``'api_key': '...'``, which no name rule can catch.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from serving.recipe.findings import Finding
from serving.recipe.flags import FlagOverride
from serving.recipe.spec import LaunchSpec
from serving.recipe.vllm_flags import KNOWN_FLAGS

MASK = "***"
# A name is secret when its last word is one of these (``HF_TOKEN``, ``MYSQL_PWD``)...
_SECRET_LAST_WORDS = frozenset(
    {
        "TOKEN",
        "KEY",
        "KEYS",
        "APIKEY",
        "APIKEYS",
        "ACCESSKEY",
        "SECRETKEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "PWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "PAT",  # a personal access token (GITHUB_PAT, GH_PAT)
    }
)
# ... or ends with one of these long ones (``PGPASSWORD``, ``GITHUBTOKEN``; never ``TOKENS``)
_SECRET_LAST_ENDINGS = ("TOKEN", "PASSWORD", "PASSWD", "SECRET", "APIKEY")
# ... or when one of its words is one of these, wherever it stands (``AUTH_HEADER``).
_SECRET_ANY_WORD = re.compile(
    r"AUTH(?:N|Z|ORIZATION|ENTICATION|TOKEN|KEY)?|SECRET|PASSWORD|PASSWD|CREDENTIALS?"
)
# ... or when one of its words holds one of these (``SESSION_COOKIE``, ``PRIVATE_KEY_PEM``).
_SECRET_WORD_PARTS = ("COOKIE", "PEM", "PRIVATE")
# Alone, these are the shell's working directory and its predecessor, not passwords.
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
_NAME_WORDS = re.compile(r"[^A-Za-z0-9]+")
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
_SECRET_FLAG_WORDS = frozenset(
    {
        "token",
        "key",
        "keys",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "credential",
        "cookie",
    }
)
# argparse takes any unambiguous prefix of a long flag (``--api-ke VALUE`` is
# ``--api-key``): a prefix of a secret flag this long or longer is one, unless it is a
# flag of its own (``--ssl-keyfile``), which argparse prefers.
MIN_ABBREVIATION_CHARS = 4
# Container runtime options whose value is ``NAME=VALUE`` (judged by NAME).
_ENV_OPTIONS = frozenset({"-e", "--env"})
# scheme://user:PASSWORD@host: the password runs to the last "@" before the first "/",
# "?" or "#" that follows an "@", so "u:p@ss@db/x" and "u:a/b@db/x" are hidden whole
# while "u:pw@host/path?mail=a@b" keeps its path.
_URL_PASSWORD = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)"
    r"(?P<secret>[^\s@]*(?:@[^\s@/?#]*)*)(?=@)"
)
# libpq and most clients also take a password (or token) as a query parameter.
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&;](?:password|passwd|pwd|sslpassword|secret|token|access_token|api_?key)=)"
    r"(?P<secret>[^&#\s]*)",
    re.IGNORECASE,
)
# A bearer credential wherever it appears (a header in a variable, a client's debug line);
# eight characters at least, so prose such as "needs a Bearer token" stays readable.
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)", re.IGNORECASE)
# An Authorization header's credential, whatever its scheme (Basic, Token, ...).
_AUTHORIZATION = re.compile(
    r"(?P<head>\bAuthorization[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z]+\s+)?)"
    r"(?P<secret>[^\s\"',;]+)",
    re.IGNORECASE,
)
# ``NAME: VALUE`` / ``NAME=VALUE`` in any quoting (a header ``x-api-key: V``, a log's
# `` token=V``, vLLM's ``'api_key': 'V'``, JSON's ``"password": "V"``): VALUE is hidden
# when NAME is a secret name (or ``--flag`` a secret flag). A quoted value runs to its
# closing quote; a bare one to a space or a separator.
_NAMED_VALUE = re.compile(
    r"""(?<![\w.-])(?P<q>["']?)(?P<name>-{0,2}[A-Za-z_][\w.-]*)(?P=q)"""
    r"""(?P<sep>\s*[:=]\s*)"""
    r"""(?P<value>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|[^\s,;}\])'"&<>]+)"""
)
# ``--secret-flag VALUE`` in a line (an echoed command line), and a user's password given
# to curl and friends as ``-u user:PASSWORD`` / ``--user user:PASSWORD``.
_FLAG_VALUE = re.compile(
    r"""(?<!\S)(?P<flag>--?[A-Za-z][\w-]*)(?P<sep>\s+)(?P<q>["']?)(?P<value>[^\s"']+)(?P=q)"""
)
_USER_FLAGS = frozenset({"-u", "--user", "--proxy-user"})
# ``user:PASSWORD@host`` without a scheme (``git``, ``rsync``, a proxy setting).
_USER_PASSWORD = re.compile(
    r"(?<![\w/:@.%+-])(?P<head>[A-Za-z_][\w.+-]*:)(?P<secret>[^\s:@/\"']+)(?=@[A-Za-z0-9])"
)
# Known values shorter than this are not searched for in free text (a one-letter password
# would garble every line); they are still masked wherever a rule above finds them.
MIN_KNOWN_SECRET_CHARS = 4
# Values a secret-named variable may hold that are settings, not secrets.
_PLAIN_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null"})


def is_secret_name(name: str) -> bool:
    """True when an environment variable's name says it holds a secret.

    Its last word is a secret word (``HF_TOKEN``, ``MYSQL_PWD``, ``REDIS_PASS``) or ends
    in a long one (``PGPASSWORD``), or one of its words is ``AUTH...``, ``SECRET``,
    ``PASSWORD`` or ``CREDENTIALS``. Words only contained in a name do not count:
    ``..._TOKENS`` counts tokens, ``KEY_FILE`` is a path, ``MONKEY`` and ``BYPASS`` are no
    key and no pass.
    """
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    words = [word for word in _NAME_WORDS.split(upper) if word]
    if not words:
        return False
    last = words[-1]
    return (
        last in _SECRET_LAST_WORDS
        or last.endswith(_SECRET_LAST_ENDINGS)
        or any(_SECRET_ANY_WORD.fullmatch(word) for word in words)
        or any(part in word for word in words for part in _SECRET_WORD_PARTS)
    )


def is_secret_flag(flag: str) -> bool:
    """True for a flag whose value is a secret (known, abbreviated, or by a word of its name)."""
    normalized = "--" + flag.lstrip("-").replace("_", "-").lower()
    if normalized in KNOWN_SECRET_FLAGS:
        return True
    if flag.startswith("--") and _abbreviates_a_secret_flag(normalized):
        return True
    words = re.split(r"[-_]+", flag.lstrip("-").lower())
    return any(word in _SECRET_FLAG_WORDS for word in words)


def _abbreviates_a_secret_flag(normalized: str) -> bool:
    """``--api-ke``, ``--hf-tok``: a prefix argparse would expand to a secret flag."""
    if len(normalized) < MIN_ABBREVIATION_CHARS or normalized in KNOWN_FLAGS:
        return False
    return any(known.startswith(normalized) for known in KNOWN_SECRET_FLAGS)


def _hide(value: str, found: set[str] | None) -> str:
    """``***`` for ``value``, noting the value in ``found`` (for ``KnownSecrets``)."""
    if found is not None and value and value != MASK:
        found.add(value)
    return MASK


def _sub(pattern: re.Pattern[str], text: str, found: set[str] | None) -> str:
    def hidden(match: re.Match[str]) -> str:
        return match.group("head") + _hide(match.group("secret"), found)

    return pattern.sub(hidden, text)


def _searchable(value: str) -> bool:
    """Whether a known value is searched for in free text (see ``MIN_KNOWN_SECRET_CHARS``)."""
    return len(value) >= MIN_KNOWN_SECRET_CHARS and value.lower() not in _PLAIN_VALUES


def secret_forms(value: str) -> set[str]:
    r"""``value`` as it may be printed: plain, shell-quoted, JSON, Python repr, URL-encoded.

    A secret holding a quote or a backslash is printed escaped (vLLM prints its arguments
    as a Python dict, where ``QUO'TE"`` reads ``'QUO\'TE"'``), so the plain value alone
    would not be found.
    """
    backslashed = value.replace("\\", "\\\\")
    forms = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        backslashed.replace("'", "\\'"),  # repr's form inside single quotes
        backslashed.replace('"', '\\"'),  # ... and inside double quotes
        # Shell quoting, inside its outer quotes: 'QUO'"'"'TE' and 'QUO'\''TE'.
        value.replace("'", "'\"'\"'"),
        value.replace("'", "'\\''"),
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value, safe=""),
    }
    return {form for form in forms if _searchable(form)}


def _known_pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for every form of the searchable ``values``, longest first."""
    forms = {form for value in values if _searchable(value) for form in secret_forms(value)}
    ordered = sorted(forms, key=lambda v: (-len(v), v))  # a secret holding another
    return re.compile("|".join(re.escape(value) for value in ordered)) if ordered else None


def _mask_known(texts: Iterable[str], values: set[str]) -> list[str]:
    """``texts`` with each of ``values`` (secrets hidden elsewhere in a launch) masked."""
    pattern = _known_pattern(values)
    if pattern is None:
        return list(texts)
    return [text if text == MASK else pattern.sub(MASK, text) for text in texts]


def mask_url_passwords(text: str, found: set[str] | None = None) -> str:
    """``text`` with every URL password (``scheme://user:PASSWORD@``, ``?password=``) masked."""
    masked = _sub(_URL_PASSWORD, text, found) if "://" in text else text
    if "://" not in masked:
        return masked
    return _sub(_QUERY_SECRET, masked, found)


def mask_text(text: str, found: set[str] | None = None) -> str:
    """``text`` with every secret a value rule finds masked (see the module).

    URL passwords and query tokens, bearer and ``Authorization`` credentials, the value
    of any secret-named ``NAME: VALUE``/``NAME=VALUE`` in any quoting, ``--secret-flag
    VALUE``, ``-u user:PASSWORD`` and ``user:PASSWORD@host``.
    """
    masked = mask_url_passwords(text, found)
    if "earer" in masked or "EARER" in masked:
        masked = _sub(_BEARER, masked, found)
    if "uthorization" in masked or "UTHORIZATION" in masked:
        masked = _sub(_AUTHORIZATION, masked, found)
    if ":" in masked or "=" in masked:
        masked = _mask_named_values(masked, found)
    if "-" in masked:
        masked = _FLAG_VALUE.sub(lambda match: _flag_value(match, found), masked)
    if "@" in masked:
        masked = _sub(_USER_PASSWORD, masked, found)
    return masked


def _hidden_value(raw: str, found: set[str] | None) -> str:
    """``raw`` (bare or quoted) with its content hidden, its quotes kept."""
    quote = raw[0] if raw[:1] in ("'", '"') and len(raw) >= 2 and raw[-1] == raw[0] else ""
    inner = raw[1:-1] if quote else raw
    if not inner or inner == MASK or inner.lower() in _PLAIN_VALUES:
        return raw  # nothing secret: empty, already hidden, or a setting such as None
    return f"{quote}{_hide(inner, found)}{quote}"


def _mask_named_values(text: str, found: set[str] | None) -> str:
    """Every secret ``NAME: VALUE``/``NAME=VALUE`` masked, however many pairs a line chains.

    A pair whose name is not secret gives its value back to the scan: in ``INFO proxy:
    x-api-key: V`` or ``env: OPENAI_API_KEY="V"`` the first "value" is the next pair's
    name (issue 36). So does a bare value that ends in ``:`` or ``=`` (``cookie:
    Cookie: session=V``): it is a name, and the pair after it is judged on its own.
    """
    out: list[str] = []
    pos = 0
    while (match := _NAMED_VALUE.search(text, pos)) is not None:
        value = match.group("value")
        if value.endswith((":", "=")):
            out.append(text[pos : match.start("value")])
            pos = match.start("value")
            continue
        replaced = _named_value(match, found)
        if replaced == match.group(0):
            out.append(text[pos : match.start("value")])
            pos = match.start("value")  # the value may be a pair of its own
            continue
        out.append(text[pos : match.start()] + replaced)
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def _named_value(match: re.Match[str], found: set[str] | None) -> str:
    name = match.group("name")
    if name.lower().lstrip("-").endswith("authorization"):
        return match.group(0)  # its own rule keeps the scheme word (``Bearer ***``)
    secret = is_secret_flag(name) if name.startswith("-") else is_secret_name(name)
    if not secret:
        return match.group(0)
    head = match.group(0)[: match.start("value") - match.start(0)]
    return head + _hidden_value(match.group("value"), found)


def _flag_value(match: re.Match[str], found: set[str] | None) -> str:
    flag, value, quote = match.group("flag"), match.group("value"), match.group("q")
    head = f"{flag}{match.group('sep')}{quote}"
    if flag in _USER_FLAGS and ":" in value:
        user, _, password = value.partition(":")
        return f"{head}{user}:{_hidden_value(password, found)}{quote}"
    if value.startswith("-") or not flag.startswith("--") or not is_secret_flag(flag):
        return match.group(0)
    return f"{head}{_hidden_value(value, found)}{quote}"


def _mask_assignment(assignment: str, found: set[str] | None) -> str:
    """``NAME=VALUE`` with VALUE masked when NAME looks secret (free-text rules always)."""
    name, eq, value = assignment.partition("=")
    if eq and is_secret_name(name):
        return f"{name}={_hide(value, found)}"
    return mask_text(assignment, found)


def mask_env(env: Mapping[str, str], found: set[str] | None = None) -> dict[str, str]:
    """A copy of ``env``: secret names' values masked whole, free-text rules in any value.

    A hidden value is hidden wherever else it appears (a ``DB_PASSWORD`` repeated inside
    ``DATABASE_OPTS``). ``found`` (when given) collects every value hidden.
    """
    hidden: set[str] = set()
    masked = {
        key: (_hide(value, hidden) if is_secret_name(key) else mask_text(value, hidden))
        for key, value in env.items()
    }
    if found is not None:
        found |= hidden
    return dict(zip(masked, _mask_known(masked.values(), hidden), strict=True))


def mask_argv(argv: Sequence[str], found: set[str] | None = None) -> list[str]:
    """A copy of ``argv`` with secret values replaced by ``***``.

    Handles ``--api-key VALUE`` and ``--api-key=VALUE``, ``-e NAME=VALUE``,
    ``--env NAME=VALUE`` and ``--env=NAME=VALUE``. Masking a masked argv changes nothing,
    so stored (masked) launches compare equal to a fresh mask of the same launch. A hidden
    value is hidden wherever else it appears (an API key repeated inside another flag's
    value). ``found`` (when given) collects every value hidden.
    """
    hidden: set[str] = set()
    masked: list[str] = []
    hide_next = False
    assignment_next = False
    for arg in argv:
        if hide_next:
            masked.append(_hide(arg, hidden))
            hide_next = False
            continue
        if assignment_next:
            masked.append(_mask_assignment(arg, hidden))
            assignment_next = False
            continue
        flag, eq, value = arg.partition("=")
        if flag in _ENV_OPTIONS:
            if eq:
                masked.append(f"{flag}={_mask_assignment(value, hidden)}")
            else:
                masked.append(arg)
                assignment_next = True
            continue
        if flag.startswith("-") and is_secret_flag(flag):
            if eq:
                masked.append(f"{flag}={_hide(value, hidden)}")
            else:
                masked.append(arg)
                hide_next = True
            continue
        if eq and not arg.startswith("-") and flag.isidentifier() and is_secret_name(flag):
            masked.append(f"{flag}={_hide(value, hidden)}")
            continue
        masked.append(mask_text(arg, hidden))
    if found is not None:
        found |= hidden
    return _mask_known(masked, hidden)


def mask_spec(spec: LaunchSpec, known: KnownSecrets | None = None) -> LaunchSpec:
    """``spec`` as it may be served: argv, environment and preset overrides masked.

    ``known`` (fleetd's ``KnownSecrets``) also hides the secrets fleetd holds wherever
    they stand in the launch, in any of their printed forms.
    """
    # A value hidden in the flags is hidden in the environment too, and the other way round.
    hidden = set(secret_values(spec.argv, spec.env))

    def masked_argv(words: Sequence[str]) -> tuple[str, ...]:
        shown = _mask_known(mask_argv(words), hidden)
        return tuple(shown if known is None else (known.mask(word) for word in shown))

    overrides = tuple(
        FlagOverride(item.flag, masked_argv(item.preset_tokens), masked_argv(item.recipe_tokens))
        for item in spec.preset_overrides
    )
    env = dict(zip(spec.env, _mask_known(mask_env(spec.env).values(), hidden), strict=True))
    if known is not None:
        env = {name: known.mask(value) for name, value in env.items()}
    return dataclasses.replace(
        spec, argv=masked_argv(spec.argv), env=env, preset_overrides=overrides
    )


def masked_findings(findings: Iterable[Finding], table: Mapping[str, Any]) -> list[Finding]:
    """Lint findings as they may be shown: no finding names a secret value.

    A finding about a secret flag or variable shows ``***`` for its value; any other
    value or reason is masked by the value rules and by every value the recipe
    ``table`` (its ``extra_args`` and ``env``) hides: a near-miss flag's finding once
    printed ``--api-ke``'s key in the profiles list.
    """
    args = table.get("extra_args")
    env = table.get("env")
    hidden = set(
        secret_values(
            [str(arg) for arg in args] if isinstance(args, list | tuple) else [],
            {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else {},
        )
    )
    shown: list[Finding] = []
    for finding in findings:
        key = finding.key
        secret = (key.startswith("-") and is_secret_flag(key)) or (
            key.startswith("env.") and is_secret_name(key[len("env.") :])
        )
        value, reason = _mask_known([mask_text(finding.value), mask_text(finding.reason)], hidden)
        if secret and finding.value:
            value = MASK
        shown.append(dataclasses.replace(finding, value=value, reason=reason))
    return shown


def secret_values(argv: Sequence[str], env: Mapping[str, str]) -> frozenset[str]:
    """Every value the rules hide in a launch's ``argv`` and environment."""
    found: set[str] = set()
    mask_argv(argv, found)
    mask_env(env, found)
    return frozenset(found)


class KnownSecrets:
    """Secret values fleetd handed out or holds, replaced by ``***`` in any text.

    The engine's output is free text: vLLM echoes ``--api-key`` and the environment in
    forms no name rule can parse, so every value fleetd itself passed (``secret_values``
    of each launch) and its own secrets are searched for literally. Values are only ever
    added (a line from an earlier launch may hold an earlier key); thread-safe: the log
    reader masks while a launch adds.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        """Know these values too (short or plain ones are ignored, see the module)."""
        with self._lock:
            fresh = {value for value in values if _searchable(value)} - self._values
            if not fresh:
                return
            self._values |= fresh
            self._pattern = _known_pattern(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def mask(self, text: str) -> str:
        """``text`` with every known value and every free-text secret masked."""
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(MASK, text)
        return mask_text(text)
