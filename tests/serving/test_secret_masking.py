"""Secrets in a recipe never reach what fleetd writes or serves; the engine log needs the token.

A real simulated fleetd launches a recipe carrying an API key, a Hugging Face token (both
flag forms), URL passwords in a flag and in an innocently named variable, and a token in
the environment. Every file under the state dir (engine record, ``fleet.db`` and its
WAL), fleetd's launch header in the engine log, the events and the recipe document are
read as a local user would, and none may hold a secret. The engine's own lines may (vLLM
prints its arguments at start, and the simulated engine does too), which is why the log
needs the token.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon.config_secrets import exposed_secrets, recipe_secret_keys
from serving.recipe.build import build_launch
from serving.recipe.masking import (
    KnownSecrets,
    is_secret_flag,
    is_secret_name,
    mask_argv,
    mask_env,
    mask_spec,
    mask_text,
    secret_values,
)
from serving.recipe.recipe import recipe_from_table
from tests.support import loopback
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until

SECRETS = (
    "sk-live-APIKEY1234",
    "hf_FLAGTOKEN5678",
    "REDISPASSWORD9",
    "DBPASSWORD42",
    "hf_ENVTOKEN77",
)
RECIPE = """
[serving]
probe_interval_s = 0.3
stop_timeout_s = 5

[serving.recipe]
preset = "sim-engine"
extra_args = [
    "--api-key", "sk-live-APIKEY1234",
    "--hf-token=hf_FLAGTOKEN5678",
    "--redis-url", "redis://cache:REDISPASSWORD9@localhost:6379/0",
    "--sim-ready-after-s", "0.5",
]

[serving.recipe.env]
DATABASE_URL = "postgresql://fleet:DBPASSWORD42@db.local:5432/fleet"
HF_TOKEN = "hf_ENVTOKEN77"
"""


def _leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def _launch_headers(lines: list[str]) -> list[str]:
    """fleetd's own lines in the engine log (the engine's are its own business)."""
    return [line for line in lines if line.startswith("[cmpfleet] launch")]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Fleetd]:
    config = tmp_path / "fleet.toml"
    config.write_text(RECIPE)
    started = start_fleetd(tmp_path, tmp_path / "state", config=config)
    try:
        wait_until(
            lambda: started.get("/api/v1/status").json()["serving"]["state"] == "ready",
            30,
            "the engine ready",
        )
        yield started
    finally:
        stop_all([started])


def test_nothing_fleetd_writes_or_serves_holds_a_secret(daemon: Fleetd) -> None:
    engine_log = daemon.state_dir / "engine.log"
    for path in sorted(daemon.state_dir.rglob("*")):
        if path.is_file() and path != engine_log:
            assert _leaks(path.read_bytes().decode("latin-1")) == [], path.name
    headers = _launch_headers(engine_log.read_text().splitlines())
    assert len(headers) == 1 and _leaks(headers[0]) == []
    assert "--api-key *** --hf-token=*** --redis-url redis://cache:***@localhost" in headers[0]
    auth = {"Authorization": f"Bearer {daemon.token}"}
    # The recipe's environment needs the token even on loopback, as the engine log does.
    assert loopback.get(daemon.url + "/api/v1/serving/recipe", timeout=10).status_code == 401
    recipe = loopback.get(daemon.url + "/api/v1/serving/recipe", headers=auth, timeout=10).json()
    assert _leaks(json.dumps(recipe)) == []
    env = recipe["spec"]["env"]
    assert env["DATABASE_URL"] == "postgresql://fleet:***@db.local:5432/fleet"
    assert env["HF_TOKEN"] == "***"
    events = loopback.get(daemon.url + "/api/v1/events?limit=500", headers=auth, timeout=10)
    assert events.status_code == 200 and _leaks(events.text) == []
    shown = run_fleetctl_here(
        "--url", daemon.url, "recipe", "show", env={"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    )
    assert shown.returncode == 0, shown.stderr
    assert _leaks(shown.stdout) == [] and "--api-key '***'" in shown.stdout


def test_the_engine_log_needs_the_token_even_on_loopback(daemon: Fleetd) -> None:
    logs = daemon.url + "/api/v1/serving/logs"
    assert loopback.get(logs, timeout=10).status_code == 401
    assert (
        loopback.get(logs, headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 403
    )
    with httpx.stream("GET", logs + "/follow?lines=1", timeout=10) as response:
        assert response.status_code == 401
    answer = loopback.get(logs, headers={"Authorization": f"Bearer {daemon.token}"}, timeout=10)
    assert answer.status_code == 200
    headers = _launch_headers(answer.json()["lines"])
    assert len(headers) == 1 and _leaks(headers[0]) == []
    # fleetctl sends the token it finds for the log (state dir, as the daemon's user)
    as_owner = {"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    fetched = run_fleetctl_here("--url", daemon.url, "logs", "--lines", "50", env=as_owner)
    assert fetched.returncode == 0, fetched.stderr
    assert _launch_headers(fetched.stdout.splitlines()) == headers
    # without a token it says how to get one, in one line
    nobody = {"CMPFLEET_STATE_DIR": str(daemon.state_dir / "absent")}
    refused = run_fleetctl_here("--url", daemon.url, "logs", env=nobody)
    assert refused.returncode != 0
    assert refused.stderr.strip().count("\n") == 0 and "token" in refused.stderr
    followed = run_fleetctl_here("--url", daemon.url, "logs", "--follow", env=nobody)
    assert followed.returncode != 0 and "token" in followed.stderr


def test_masking_rules() -> None:
    argv = [
        "vllm",
        "--api-key",
        "k1",
        "--api_key=k2",
        "--tokenizer-mode",
        "deepseek_v4",
        "--max-num-batched-tokens",
        "2048",
        "--s3-access-key",
        "k3",
        "-e",
        "HF_TOKEN=t1",
        "--env=API_SECRET=t2",
        "--env",
        "DB=mysql://u:p4ss@h/db",
        "http://host:8000/v1",
    ]
    masked = mask_argv(argv)
    assert masked == [
        "vllm",
        "--api-key",
        "***",
        "--api_key=***",
        "--tokenizer-mode",
        "deepseek_v4",
        "--max-num-batched-tokens",
        "2048",
        "--s3-access-key",
        "***",
        "-e",
        "HF_TOKEN=***",
        "--env=API_SECRET=***",
        "--env",
        "DB=mysql://u:***@h/db",
        "http://host:8000/v1",
    ]
    assert mask_argv(masked) == masked  # stored launches compare equal to a fresh mask
    assert mask_env({"URL": "redis://:pw@h", "PLAIN": "x"}) == {
        "URL": "redis://:***@h",
        "PLAIN": "x",
    }
    # a password with an unescaped slash, and passwords/tokens given as query parameters
    assert mask_argv(["--db", "postgresql://u:ab/cd@h/db"]) == ["--db", "postgresql://u:***@h/db"]
    assert mask_env({"DB": "postgresql://h/db?sslmode=require&password=pw1"}) == {
        "DB": "postgresql://h/db?sslmode=require&password=***"
    }
    assert mask_argv(["--url", "https://h/v1?token=t0&x=1"]) == [
        "--url",
        "https://h/v1?token=***&x=1",
    ]


def test_recipe_show_of_a_local_file_masks_its_secrets(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        'preset = "dsv4-flash-pp4-dspark"\nextra_args = ["--api-key", "sk-live-APIKEY1234"]\n'
        '[env]\nHF_TOKEN = "hf_ENVTOKEN77"\n'
    )
    human = run_fleetctl_here("recipe", "show", str(recipe))
    as_json = run_fleetctl_here("recipe", "show", str(recipe), "--json")
    assert human.returncode == 0 and as_json.returncode == 0, human.stderr + as_json.stderr
    assert _leaks(human.stdout + as_json.stdout) == []
    spec = json.loads(as_json.stdout)
    assert spec["env"]["HF_TOKEN"] == "***" and "sk-live-APIKEY1234" not in spec["argv"]
    assert spec["argv"][spec["argv"].index("--api-key") + 1] == "***"


# -- the rules, table by table (each rule both ways) ---------------------------------------

SECRET_NAMES = [
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "MYSQL_PWD",
    "REDIS_PASS",
    "PGPASSWORD",
    "GITHUBTOKEN",
    "DB_PASSWORD",
    "SMTP_PASSWD",
    "GPG_PASSPHRASE",
    "AUTH_HEADER",
    "BASIC_AUTH",
    "PROXY_AUTHORIZATION",
    "SECRET_KEY_BASE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "APIKEY",
    "hf_token",
    "my-api-key",
    "API_KEYS",  # issue 33: the names no rule caught
    "SESSION_COOKIE",
    "PRIVATE_KEY_PEM",
    "TLS_PRIVATE_KEY",
]
PLAIN_NAMES = [
    "VLLM_MIN_THINKING_TOKENS",
    "GLM53_IDX_PREFILL_BUF_TOKENS",
    "MAX_TOKENS",
    "TOKENIZERS_PARALLELISM",
    "HF_TOKEN_PATH",
    "KEY_FILE",
    "SSL_KEYFILE",
    "PWD",
    "OLDPWD",
    "AUTHOR",
    "DATABASE_URL",
    "HF_HUB_OFFLINE",
    "PYTORCH_CUDA_ALLOC_CONF",
    "DSV4_LOGITS_ROW_CHUNK",
    "CUDA_VISIBLE_DEVICES",
    "MONKEY",
    "BYPASS",
    "PGPASSWORD_FILE",
]


@pytest.mark.parametrize(
    ("name", "secret"),
    [(name, True) for name in SECRET_NAMES] + [(name, False) for name in PLAIN_NAMES],
)
def test_secret_names_end_in_a_secret_word(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
    masked = mask_env({name: "value-1234"})[name]
    assert masked == ("***" if secret else "value-1234")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://u:p@ss777@db/x", "postgresql://u:***@db/x"),
        ("postgresql://u:ab/cd@h/db", "postgresql://u:***@h/db"),
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("https://u:pw@host/path?mail=a@b.org", "https://u:***@host/path?mail=a@b.org"),
        ("mysql://u:a@b@c@h", "mysql://u:***@h"),
        (
            "postgresql://h/db?sslmode=require&password=pw1",
            "postgresql://h/db?sslmode=require&password=***",
        ),
        ("https://h/v1?token=t0&x=1", "https://h/v1?token=***&x=1"),
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("https://user@host/x", "https://user@host/x"),
        ("Authorization: Bearer abcdef123456", "Authorization: Bearer ***"),
        ("{'Authorization': 'Basic dXNlcjpwYXNz'}", "{'Authorization': 'Basic ***'}"),
        ("bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "bearer ***"),
        ("the request needs a Bearer token", "the request needs a Bearer token"),
        ("Authorization failed for user", "Authorization failed for user"),
    ],
)
def test_free_text_secrets(text: str, shown: str) -> None:
    found: set[str] = set()
    assert mask_text(text, found) == shown
    assert all(secret not in mask_text(text) for secret in found)
    assert bool(found) is (text != shown)


def test_a_hidden_value_is_hidden_wherever_it_repeats_in_the_launch() -> None:
    argv = ["vllm", "--api-key", "sk-abcd", "--note", "key=sk-abcd", "--api-key=x"]
    assert mask_argv(argv) == ["vllm", "--api-key", "***", "--note", "key=***", "--api-key=***"]
    env = {"DB_PASSWORD": "hunter22", "DB_OPTS": "user=u password hunter22", "N": "4"}
    assert mask_env(env) == {"DB_PASSWORD": "***", "DB_OPTS": "user=u password ***", "N": "4"}
    found: set[str] = set()
    mask_argv(argv, found)
    mask_env(env, found)
    assert found == {"sk-abcd", "x", "hunter22"}
    assert secret_values(argv, env) == frozenset(found)


def test_known_secrets_mask_free_text() -> None:
    known = KnownSecrets(["sk-abcd", "abc", "true", "sk-abcd-longer"])
    assert len(known) == 2  # too short or a plain setting: never searched for in text
    line = "non-default args: {'api_key': 'sk-abcd-longer', 'x': 'sk-abcd abc true'}"
    assert known.mask(line) == "non-default args: {'api_key': '***', 'x': '*** abc true'}"
    assert known.mask("redis://u:pw@h") == "redis://u:***@h"  # the free-text rules as well
    known.add(["hf_later"])  # values only ever add up (an older launch's line keeps its mask)
    assert known.mask("HF_TOKEN=hf_later sk-abcd") == "HF_TOKEN=*** ***"


def test_tokens_settings_show_and_do_not_warn(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        'preset = "dsv4-flash-pp4-dspark"\n[env]\nVLLM_MIN_THINKING_TOKENS = "512"\n'
        'GLM53_IDX_PREFILL_BUF_TOKENS = "8192"\n'
    )
    recipe.chmod(0o644)
    assert recipe_secret_keys({"env": {"VLLM_MIN_THINKING_TOKENS": "512"}}) == []
    assert recipe_secret_keys({"env": {"MYSQL_PWD": "pw"}}) == ["env"]
    config = tmp_path / "fleet.toml"
    config.write_text('[serving]\nrecipe = "recipe.toml"\n')
    assert exposed_secrets(config, "recipe.toml") == []
    shown = json.loads(run_fleetctl_here("recipe", "show", str(recipe), "--json").stdout)
    assert shown["env"]["VLLM_MIN_THINKING_TOKENS"] == "512"
    assert shown["env"]["GLM53_IDX_PREFILL_BUF_TOKENS"] == "8192"


# -- issue 33: by value in every quoting, header and URL forms, abbreviated flags -------

QUOTED = "sk-QUO'TE\"D-S3CR3T"  # both quotes: Python's repr escapes one of them


@pytest.mark.parametrize(
    ("form", "text"),
    [
        ("plain", f"key is {QUOTED} here"),
        ("shell", f"exec vllm serve --x {shlex.quote(QUOTED)}"),
        ("shell-escaped", "exec vllm serve --x '" + QUOTED.replace("'", "'\\''") + "'"),
        ("json", json.dumps({"note": QUOTED})),
        ("json-ascii", json.dumps({"note": QUOTED + "\u00e9"}, ensure_ascii=True)),
        ("python-repr", repr({"note": QUOTED})),
        ("python-repr-list", repr([QUOTED, 1])),
        ("url", "https://h/x?" + urllib.parse.urlencode({"q": QUOTED})),
    ],
)
def test_a_known_secret_is_masked_in_every_quoting(form: str, text: str) -> None:
    known = KnownSecrets([QUOTED, QUOTED + "\u00e9"])
    shown = known.mask(text)
    assert "S3CR3T" not in shown, (form, shown)
    assert "***" in shown
    assert "S3CR3T" not in mask_argv(["--api-key", QUOTED, "--note", text])[3]  # in a launch


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x-api-key: HDRKEY-1", "x-api-key: ***"),
        ("X-Auth-Token: HDRTOKEN-2", "X-Auth-Token: ***"),
        ("GET /v1/models token=TOK-3 200", "GET /v1/models token=*** 200"),
        ("login failed password=PW-4", "login failed password=***"),
        ("curl -u admin:PW-5 https://h/", "curl -u admin:*** https://h/"),
        ("curl --user 'admin:PW-6' https://h/", "curl --user 'admin:***' https://h/"),
        ("rsync admin:PW-7@backup.local:/data", "rsync admin:***@backup.local:/data"),
        (
            "launch: vllm serve m --api-ke APIKE-8 --port 1",
            "launch: vllm serve m --api-ke *** --port 1",
        ),
        ("Cookie: session=COOK-9", "Cookie: ***"),
        ('{"api_key": "JSONKEY-10", "n": 2}', '{"api_key": "***", "n": 2}'),
        ("{'api_key': 'REPRKEY-11', 'port': 8000}", "{'api_key': '***', 'port': 8000}"),
        ("RPC timed out (api_key=sk-12)", "RPC timed out (api_key=***)"),
        # issue 36: a secret pair after an earlier ``word:`` on the line, and GITHUB_PAT
        ("INFO proxy: x-api-key: HDRKEY-13", "INFO proxy: x-api-key: ***"),
        ('env: OPENAI_API_KEY="ENVKEY-14"', 'env: OPENAI_API_KEY="***"'),
        ("hdr: X-Auth-Token: HDRTOKEN-15", "hdr: X-Auth-Token: ***"),
        ("cookie: Cookie: session=COOK-16", "cookie: Cookie: ***"),
        ("GITHUB_PAT=ghp_PAT-17", "GITHUB_PAT=***"),
        # settings and prose stay readable
        ("max_num_batched_tokens=8192 ssl_keyfile_password=None", None),
        ("--ssl-keyfile /etc/cmpfleet/key.pem --tokenizer-mode auto", None),
        ("INFO 01-02 10:22:33 [core.py:512] engine ready at http://host:8000/v1", None),
        ("mail admin@example.org about it", None),
    ],
)
def test_value_patterns(text: str, shown: str | None) -> None:
    found: set[str] = set()
    assert mask_text(text, found) == (text if shown is None else shown)
    assert bool(found) is (shown is not None)
    assert mask_text(mask_text(text)) == mask_text(text)  # masking a masked text is a no-op


@pytest.mark.parametrize(
    ("flag", "secret"),
    [
        ("--api-key", True),
        ("--api-ke", True),  # argparse takes any unambiguous prefix
        ("--api-k", True),
        ("--api_ke", True),
        ("--hf-tok", True),
        ("--api-keys", True),
        ("--ssl-keyfile", False),  # a flag of its own, which argparse prefers
        ("--tokenizer", False),
        ("--host", False),
        ("-a", False),
    ],
)
def test_secret_flags_and_their_abbreviations(flag: str, secret: bool) -> None:
    assert is_secret_flag(flag) is secret
    masked = mask_argv(["vllm", "serve", "m", flag, "VALUE-1234"])
    assert (masked[4] == "***") is secret


def test_a_secret_hidden_in_the_environment_is_hidden_in_the_flags_too() -> None:
    spec = build_launch(
        recipe_from_table(
            {
                "preset": "sim-engine",
                "extra_args": ["--sim-log-line", f"0.1=dump {QUOTED}"],
                "env": {"API_KEYS": QUOTED, "SESSION_COOKIE": "COOKIE-VALUE-1"},
            },
            "test",
        )
    )
    shown = mask_spec(spec)
    assert shown.env["API_KEYS"] == "***" and shown.env["SESSION_COOKIE"] == "***"
    assert "0.1=dump ***" in shown.argv
    held = KnownSecrets(["FLEETD-OWN-TOKEN"])
    with_token = dataclasses.replace(spec, argv=(*spec.argv, "--note", "FLEETD-OWN-TOKEN"))
    assert mask_spec(with_token, held).argv[-1] == "***"  # fleetd's own secrets as well
