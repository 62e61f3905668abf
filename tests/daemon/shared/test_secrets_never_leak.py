"""Known secrets never reach fleetd's log, the API's documents, fleetctl or alert payloads.

One fleetd holds every kind of secret the product knows: the API token, a webhook's
signing secret, webhook URLs with credentials, a query token and a key in the path
(Slack, Discord), a traffic-guard client key (used, its hash configured), and a recipe's
API key and secret environment (``HF_TOKEN``, ``MYSQL_PWD``, ``REDIS_PASS``, a bearer header). An Xid and a test alert make it deliver
(two webhooks answer, one is down so failures are logged), then everything a person or a
script can read is searched for each secret. The config is left readable by others, so
fleetd must also warn, naming the keys but not the values.

The simulated engine echoes its flags and its whole environment into its log, as vLLM
prints its arguments, and a line naming the API key and a token; then it crashes on a
line of that kind, so the key is in the crash's evidence. The log (with the token, in
every form: lines, text, follow, server-sent events, ``fleetctl logs``), the status and
its stream, the events and the alert payloads must show none of the values, masked.
"""

from __future__ import annotations

import base64
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.config_secrets import exposed_secrets, readable_secret_keys
from serving.guard.keys import hash_key
from tests.support import loopback
from tests.support.cli import run_fleetctl_here
from tests.support.fleetd import Fleetd, free_port, start_fleetd, stop_all, wait_until
from tests.support.waiting import DEADLINE_SCALE
from tests.support.webhook import WebhookReceiver

HOOK_SECRET = "HMACSECRET-H5"
HOOK_PASSWORD = "HOOKPASS-P1"
QUERY_TOKEN = "QUERYTOKEN-Q7"
SLACK_KEY = "SLACKKEY-S3"
DISCORD_KEY = "DISCORDKEY-D9"
API_KEY = "sk-APIKEY-A2"
HF_TOKEN = "hf_ENVTOKEN-E4"
MYSQL_PWD = "MYSQLPWD-M6"
REDIS_PASS = "REDISPASS-R8"
BEARER = "BEARERTOKEN-B5"
GUARD_KEY = "cmpg-GUARDKEY-G1-only-its-hash-is-configured"
# Issue 33: forms no rule caught. Names: ``*KEYS``, ``*COOKIE*``, ``*PEM*``; an abbreviated
# flag argparse accepts; header, query-less ``token=`` and ``curl -u`` forms in engine
# lines; a known secret printed in Python-repr and JSON quoting (it holds both quotes,
# so repr escapes one), in lines that name no secret.
API_KEYS = "APIKEYS-K1"
SESSION_COOKIE = "SESSIONCOOKIE-C2"
QUOTED_PEM = "PEM-QUO'TE\"D-P3"
ABBREVIATED_KEY = "ABBREVKEY-A4"
HEADER_KEY = "HEADERKEY-X5"
BARE_TOKEN = "BARETOKEN-T6"
CURL_PASSWORD = "CURLPASS-U7"
NOTE = {"note": QUOTED_PEM}  # the known secret inside a dict, printed two ways
# Each form above as the engine prints it (before the RPC line, so before the crash).
FORM_LINES = (
    f"0.05=proxy: forwarding with x-api-key: {HEADER_KEY}",
    f"0.05=GET /v1/models token={BARE_TOKEN} 200",
    f"0.05=fetch: curl -u admin:{CURL_PASSWORD} http://mirror.local/weights",
    f"0.05=non-default args: {NOTE!r}",
    f"0.05=override config: {json.dumps(NOTE)}",
)
ISSUE_33_SECRETS = (
    API_KEYS,
    SESSION_COOKIE,
    QUOTED_PEM,
    ABBREVIATED_KEY,
    HEADER_KEY,
    BARE_TOKEN,
    CURL_PASSWORD,
)
ENGINE_SECRETS = (API_KEY, HF_TOKEN, MYSQL_PWD, REDIS_PASS, BEARER, *ISSUE_33_SECRETS)
# An engine line of the rpc_timeout kind holding the key: the crash's evidence.
RPC_TEXT = "ERROR [core.py:512] RPC call to execute_model timed out"
RPC_LINE = f"{RPC_TEXT} (api_key={API_KEY})"
CONFIG_SECRETS = (
    HOOK_SECRET,
    HOOK_PASSWORD,
    QUERY_TOKEN,
    SLACK_KEY,
    DISCORD_KEY,
    *ENGINE_SECRETS,
)
# Streams never end: read by the engine-output test below, a frame or a backlog at a time.
UNREADABLE_HERE = ("/api/v1/stream", "/api/v1/serving/logs/follow", "/api/v1/serving/logs/stream")


def config_text(receiver: WebhookReceiver, down_port: int, guard_port: int) -> str:
    with_credentials = receiver.url.replace("http://", f"http://hookuser:{HOOK_PASSWORD}@")
    return f"""
[serving]
probe_interval_s = 0.3

[recovery]
backoff_base_s = 0.5

[serving.recipe]
preset = "sim-engine"
extra_args = [
    "--api-key", "{API_KEY}", "--sim-ready-after-s", "0.3",
    "--sim-log-line", "0.1={RPC_LINE}", "--sim-crash-kind", "engine_dead",
    "--api-ke", "{ABBREVIATED_KEY}",
    {", ".join(f'"--sim-log-line", {json.dumps(line)}' for line in FORM_LINES)},
]

[serving.recipe.env]
HF_TOKEN = "{HF_TOKEN}"
MYSQL_PWD = "{MYSQL_PWD}"
REDIS_PASS = "{REDIS_PASS}"
AUTH_HEADER = "Bearer {BEARER}"
VLLM_MIN_THINKING_TOKENS = "512"
API_KEYS = "{API_KEYS}"
SESSION_COOKIE = "{SESSION_COOKIE}"
PRIVATE_KEY_PEM = {json.dumps(QUOTED_PEM)}

[alerts]
retry_min_s = 0.05
retry_max_s = 0.2
group_window_s = 0

[[alerts.webhooks]]
url = "{with_credentials}/hook?token={QUERY_TOKEN}"
secret = "{HOOK_SECRET}"
min_severity = "info"

[[alerts.webhooks]]
url = "{receiver.url}/services/T000/B000/{SLACK_KEY}"
format = "slack"

[[alerts.webhooks]]
url = "http://127.0.0.1:{down_port}/api/webhooks/1/{DISCORD_KEY}"
format = "discord"

[guard]
listen = "127.0.0.1:{guard_port}"
[[guard.keys]]
name = "laptop"
sha256 = "{hash_key(GUARD_KEY)}"
"""


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, receiver: WebhookReceiver) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("secrets")
    config = tmp / "fleet.toml"
    config.write_text(config_text(receiver, free_port(), free_port()))
    config.chmod(0o644)
    started = start_fleetd(tmp, tmp / "state", config=config)
    try:
        yield started
    finally:
        stop_all([started])


def _auth(daemon: Fleetd) -> dict[str, str]:
    return {"Authorization": f"Bearer {daemon.token}"}


def _deliveries(daemon: Fleetd) -> list[dict[str, Any]]:
    alerts = loopback.get(
        daemon.url + "/api/v1/alerts", headers=_auth(daemon), timeout=10 * DEADLINE_SCALE
    ).json()
    return [note for alert in alerts["alerts"] for note in alert.get("notifications", [])]


@pytest.fixture(scope="module")
def crashed(daemon: Fleetd, receiver: WebhookReceiver) -> Fleetd:
    """The engine printed its secrets, then crashed with the key in its evidence."""

    def printed_its_line() -> bool:  # the engine of this boot is ready and said it
        serving = _get(daemon, "/api/v1/status")["serving"]
        lines = _get(daemon, "/api/v1/serving/logs?lines=5000")["lines"]
        launches = [n for n, line in enumerate(lines) if line.startswith("[cmpfleet] launch")]
        this_run = lines[launches[-1] :] if launches else []
        # The line itself, not the launch marker or the flags' echo that quote it in argv.
        said = any(line.startswith(RPC_TEXT) for line in this_run)
        return bool(serving["state"] == "ready" and said)

    wait_until(printed_its_line, 30, "the engine ready and printing its RPC line")
    raw = (daemon.state_dir / "engine.log").read_text()  # the engine's own file holds them:
    assert RPC_LINE in raw and all(secret in raw for secret in ENGINE_SECRETS)  # really out
    os.kill(_get(daemon, "/api/v1/status")["serving"]["pid"], signal.SIGUSR1)  # crash now
    receiver.wait_for(
        lambda got: any(b"EngineCrashed" in request.body for request in got), 30, "the crash alert"
    )
    return daemon


@pytest.fixture(scope="module")
def delivered(crashed: Fleetd, receiver: WebhookReceiver) -> Fleetd:
    """After the crash, an Xid and a test alert sent: two webhooks got them, one failed."""
    daemon = crashed
    before = len(receiver.requests)
    assert daemon.post("/api/v1/sim/xid", {"card": 1, "xid": 31}).status_code == 200
    assert daemon.post("/api/v1/alerts/test", {}).status_code == 200
    receiver.wait_for(
        lambda got: len(got) >= before + 4, 20, "the Xid and the test at two webhooks"
    )
    wait_until(lambda: "delivery failed" in daemon.log(), 20, "a logged delivery failure")
    return daemon


def _leaks(text: str, secrets: tuple[str, ...]) -> list[str]:
    return [secret for secret in secrets if secret in text]


def test_nothing_readable_holds_a_secret(delivered: Fleetd, receiver: WebhookReceiver) -> None:
    daemon = delivered
    secrets = (*CONFIG_SECRETS, daemon.token, GUARD_KEY)
    guard = daemon.get("/api/v1/guard").json()["listen"]
    through = loopback.get(
        f"http://{guard}/v1/models", headers={"Authorization": f"Bearer {GUARD_KEY}"}
    )
    assert through.status_code in (200, 503)  # the key was taken (the engine may be restarting)
    seen: dict[str, str] = {"fleetd log": daemon.log()}
    paths = daemon.get("/openapi.json").json()["paths"]
    readable = [
        path
        for path, methods in paths.items()
        if "get" in methods and "{" not in path and not path.startswith(UNREADABLE_HERE)
    ]
    assert {"/api/v1/status", "/api/v1/alerts", "/api/v1/serving/recipe"} <= set(readable)
    # What shows the launch's environment needs the token even on loopback (issue 33).
    for path in ("/api/v1/serving/recipe", "/api/v1/serving/logs"):
        assert loopback.get(daemon.url + path, timeout=10 * DEADLINE_SCALE).status_code == 401, path
    for path in [*readable, "/metrics", "/openapi.json", "/api/v1/events?limit=1000"]:
        answer = loopback.get(daemon.url + path, headers=_auth(daemon), timeout=10 * DEADLINE_SCALE)
        assert answer.status_code == 200, path
        seen[path] = answer.text
    as_owner = {"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    for command in (["status"], ["events"], ["alerts"], ["recipe", "show"], ["canary", "status"]):
        shown = run_fleetctl_here("--url", daemon.url, "--json", *command, env=as_owner)
        assert shown.stdout.strip(), (command, shown.stderr)
        seen["fleetctl " + " ".join(command)] = shown.stdout + shown.stderr
    for got in receiver.requests:
        seen[f"payload to {got.path.split('?')[0]}"] = got.body.decode()
    # the secrets were really in play: the engine got its key, the hooks their credentials
    assert API_KEY in (daemon.state_dir / "engine.log").read_text()
    hook = next(got for got in receiver.requests if got.path.startswith("/hook"))
    basic = base64.b64encode(f"hookuser:{HOOK_PASSWORD}".encode()).decode()
    assert hook.headers.get("Authorization") == f"Basic {basic}"
    assert hook.headers.get("X-Cmpfleet-Signature", "").startswith("sha256=")
    leaks = {where: _leaks(text, secrets) for where, text in seen.items()}
    assert {where: found for where, found in leaks.items() if found} == {}
    # the failures the down webhook logged name it without its key
    assert "http://127.0.0.1:" in daemon.log() and "/..." in daemon.log()


def test_a_config_with_secrets_readable_by_others_is_warned_about(delivered: Fleetd) -> None:
    warning = next(line for line in delivered.log().splitlines() if "others can read" in line)
    for key in (
        "alerts.webhooks[0].secret",
        "alerts.webhooks[0].url",
        "alerts.webhooks[1].url",
        "alerts.webhooks[2].url",
        "serving.recipe.env",
        "serving.recipe.extra_args",
    ):
        assert key in warning
    assert _leaks(warning, CONFIG_SECRETS) == []


def test_which_files_warn(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    plain_hook = '[[alerts.webhooks]]\nurl = "https://alerts.example.org/cmpfleet"\n'
    config.write_text(plain_hook + 'secret_file = "/etc/cmpfleet/webhook.secret"\n')
    config.chmod(0o644)
    assert readable_secret_keys(config) == []  # docs/reference.md: such a config may stay readable
    config.write_text('[store]\nurl = "postgresql+psycopg://fleet:DBPASS@db/fleet"\n')
    assert readable_secret_keys(config) == ["store.url"]
    config.chmod(0o640)
    assert readable_secret_keys(config) == ["store.url"]  # the group is other people too
    config.chmod(0o600)
    assert readable_secret_keys(config) == []
    config.write_text('[store]\nurl = "sqlite:////var/lib/cmpfleet/fleet.db"\n')
    config.chmod(0o644)
    assert readable_secret_keys(config) == []


def test_a_recipe_file_the_config_names_is_judged_too(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text('[serving]\nrecipe = "recipe.toml"\n')
    config.chmod(0o644)
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(f'preset = "dsv4-flash-pp4-dspark"\n[env]\nHF_TOKEN = "{HF_TOKEN}"\n')
    recipe.chmod(0o644)
    assert exposed_secrets(config, "recipe.toml") == [(recipe, ["env"])]
    recipe.chmod(0o600)
    assert exposed_secrets(config, "recipe.toml") == []


def _get(daemon: Fleetd, path: str) -> Any:
    """A JSON document read with the token."""
    answer = loopback.get(daemon.url + path, headers=_auth(daemon), timeout=10 * DEADLINE_SCALE)
    assert answer.status_code == 200, (path, answer.text)
    return answer.json()


def _stream_text(daemon: Fleetd, path: str, until: str, timeout_s: float = 20) -> str:
    """What a never-ending stream sent (with the token) until ``until`` is in it."""
    received = ""
    with httpx.stream(
        "GET", daemon.url + path, headers=_auth(daemon), timeout=timeout_s
    ) as response:
        assert response.status_code == 200, path
        for chunk in response.iter_text():
            received += chunk
            if until in received:
                return received
    raise AssertionError(f"{path} ended before {until!r}: {received[-500:]!r}")


def test_engine_output_is_masked_on_every_surface(
    delivered: Fleetd, receiver: WebhookReceiver
) -> None:
    daemon = delivered
    auth = _auth(daemon)
    as_owner = {"CMPFLEET_STATE_DIR": str(daemon.state_dir)}
    seen: dict[str, str] = {}
    for path in ("/api/v1/serving/logs?lines=5000", "/api/v1/serving/logs/text?lines=5000"):
        answer = loopback.get(daemon.url + path, headers=auth, timeout=10 * DEADLINE_SCALE)
        assert answer.status_code == 200, path
        seen[path] = answer.text
    for path in (
        "/api/v1/serving/logs/follow?lines=5000",
        "/api/v1/serving/logs/stream?lines=5000",
    ):
        seen[path] = _stream_text(daemon, path, "RPC call to execute_model")
    seen["/api/v1/stream"] = _stream_text(daemon, "/api/v1/stream", "event: status")
    status = loopback.get(daemon.url + "/api/v1/status", headers=auth, timeout=10 * DEADLINE_SCALE)
    seen["status with the token"] = status.text
    assert "last_log_line" in status.json()["serving"]
    # Without the token (loopback: allowed) the status and its stream carry no log text.
    public = loopback.get(daemon.url + "/api/v1/status", timeout=10 * DEADLINE_SCALE).json()
    assert "last_log_line" not in public["serving"]
    with httpx.stream("GET", daemon.url + "/api/v1/stream", timeout=10 * DEADLINE_SCALE) as frames:
        first = next(line for line in frames.iter_lines() if line.startswith("data: "))
    assert "last_log_line" not in first
    events = loopback.get(
        daemon.url + "/api/v1/events?limit=1000", headers=auth, timeout=10 * DEADLINE_SCALE
    )
    seen["events"] = events.text
    logs = run_fleetctl_here("--url", daemon.url, "logs", "--lines", "5000", env=as_owner)
    assert logs.returncode == 0, logs.stderr
    seen["fleetctl logs"] = logs.stdout
    for got in receiver.requests:
        seen[f"payload to {got.path.split('?')[0]}"] = got.body.decode()
    seen["fleetd log"] = daemon.log()
    leaks = {where: _leaks(text, (*ENGINE_SECRETS, daemon.token)) for where, text in seen.items()}
    assert {where: found for where, found in leaks.items() if found} == {}
    # Masked, not dropped: the lines are there with *** in place of each value.
    log_text = seen["fleetctl logs"]
    assert "RPC call to execute_model timed out (api_key=***)" in log_text
    assert "--api-key ***" in log_text  # the engine's own echo of its flags
    for shown in ("MYSQL_PWD=***", "REDIS_PASS=***", "AUTH_HEADER=***", "HF_TOKEN=***"):
        assert shown in log_text
    assert "VLLM_MIN_THINKING_TOKENS=512" in log_text  # a setting, shown in clear
    for shown in (  # issue 33's forms, each in its own quoting
        "API_KEYS=***",
        "SESSION_COOKIE=***",
        "PRIVATE_KEY_PEM=***",
        "--api-ke ***",
        "x-api-key: ***",
        "token=*** 200",
        "curl -u admin:*** http://mirror.local/weights",
        "non-default args: {'note': '***'}",
        'override config: {"note": "***"}',
    ):
        assert shown in log_text, shown
    crash = [e["message"] for e in events.json() if "rpc_timeout" in e["message"]]
    assert any("(api_key=***)" in message for message in crash), crash  # the evidence, masked
    crash_alerts = [got.body.decode() for got in receiver.requests if b"EngineCrashed" in got.body]
    assert any("api_key=***" in body for body in crash_alerts), crash_alerts
