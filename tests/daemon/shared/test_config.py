"""Config loading: precedence, defaults, and one test per class of mistake."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from daemon.config import ConfigError, Settings, WebhookSettings, load_settings
from hwcheck.checks import KNOWN_CHECK_IDS
from hwcheck.kernellog.catalogue import XidOverride
from recovery.settings import DEFAULT_GATE_CHECKS
from tests.support.cli import run_fleetctl
from tests.support.fleetd import run_fleetd

EXAMPLE = Path(__file__).resolve().parents[3] / "daemon" / "examples" / "fleet.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


def test_absent_and_empty_files_are_valid(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "nope.toml", missing_ok=True, environ={}) == Settings()
    assert load_settings(write(tmp_path, ""), environ={}) == Settings()


def test_precedence_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = write(tmp_path, '[poll]\ninterval_s = 5\n[web]\nlisten = "127.0.0.1:9000"\n')
    assert load_settings(path, environ={}).poll.interval_s == 5
    env = {"CMPFLEET_POLL_INTERVAL_S": "1.5", "CMPFLEET_WEB_LISTEN": "127.0.0.1:9001"}
    from_env = load_settings(path, environ=env)
    assert from_env.poll.interval_s == 1.5
    assert from_env.web.listen == "127.0.0.1:9001"
    flagged = load_settings(path, environ=env, overrides={"web": {"listen": "127.0.0.1:9002"}})
    assert flagged.web.listen == "127.0.0.1:9002"
    assert flagged.poll.interval_s == 1.5


def test_example_config_is_valid_and_documents_every_key() -> None:
    settings = load_settings(EXAMPLE, environ={})
    assert settings == Settings()  # the example shows the defaults
    text = EXAMPLE.read_text()
    missing = []
    for section_name, section in Settings.model_fields.items():
        annotation = section.annotation
        fields = getattr(annotation, "model_fields", {})
        for key, info in fields.items():
            shown = info.validation_alias or info.alias or key
            as_key = rf"^#?\s*{re.escape(shown)}\s*="
            as_table = rf"^#?\s*\[+{section_name}\.{re.escape(shown)}\]+"
            if not re.search(f"{as_key}|{as_table}", text, re.MULTILINE):
                missing.append(f"{section_name}.{shown}")
    for model in (WebhookSettings, XidOverride):
        for key, info in model.model_fields.items():
            shown = info.validation_alias or info.alias or key
            if not re.search(rf"^#?\s*{re.escape(shown)}\s*=", text, re.MULTILINE):
                missing.append(f"{model.__name__}.{shown}")
    assert not missing, f"daemon/examples/fleet.toml does not document: {missing}"
    for needle in ("[[alerts.webhooks]]", "[xid.31]", "[serving.recipe]", "[rig.pcie_baseline]"):
        assert needle in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[poll]\nintervall_s = 2\n", "unknown key 'poll.intervall_s'"),
        ("[pol]\ninterval_s = 2\n", "unknown key 'pol'"),
        (
            '[poll]\ninterval_s = "fast"\n',
            "poll.interval_s: expected a number, not the string 'fast'",
        ),
        ('[poll]\ninterval_s = "2"\n', "poll.interval_s: expected a number, not the string '2'"),
        ("[poll]\ninterval_s = -1\n", "poll.interval_s: Input should be greater than or equal"),
        (
            "[poll]\ninterval_s = 0.0001\n",
            "poll.interval_s: Input should be greater than or equal to 0.1 (got 0.0001)",
        ),
        (
            "[rig]\npower_cap_w = 900\n",
            "rig.power_cap_w: Input should be less than or equal to 400",
        ),
        ('[rig]\nname = "rig\\n07"\n', "rig.name: expected one line of printable characters"),
        ('[web]\nlisten = "8170"\n', "web.listen: expected HOST:PORT"),
        (
            '[web]\nallowed_hosts = ["rig.example:443"]\n',
            "web.allowed_hosts: expected host names without port or scheme, got 'rig.example:443'",
        ),
        (
            '[[alerts.webhooks]]\nurl = "http://x"\nformat = "teams"\n',
            "alerts.webhooks[0].format: Input should be",
        ),
        ('[xid.abc]\nclass = "hardware"\n', "xid: xid.abc: not an Xid number"),
        ("[poll\n", "not valid TOML"),
    ],
    ids=[
        "unknown-key",
        "unknown-section",
        "wrong-type",
        "number-as-string",
        "negative",
        "interval-too-short",
        "out-of-range",
        "bad-rig-name",
        "bad-listen",
        "bad-allowed-host",
        "bad-enum-in-list",
        "bad-xid-key",
        "syntax",
    ],
)
def test_each_class_of_mistake_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text), environ={})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / "fleet.toml") + ": ")
    assert expected in message


def test_a_bad_webhook_url_is_named_never_echoed(tmp_path: Path) -> None:
    """A webhook URL is a credential (Slack's key is its path): the error names the key only."""
    text = '[[alerts.webhooks]]\nurl = "hooks.slack.com/services/T0/B0/K3Y-SLACK"\n'
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text), environ={})
    message = str(caught.value)
    assert "alerts.webhooks[0].url: " in message and "http://" in message
    assert "K3Y-SLACK" not in message and "hooks.slack.com" not in message


def test_the_rig_is_named_by_the_config_else_by_the_host(tmp_path: Path) -> None:
    named = load_settings(write(tmp_path, '[rig]\nname = " rig-07 "\n'), environ={})
    assert named.rig.display_name() == "rig-07"
    from_env = load_settings(write(tmp_path, ""), environ={"CMPFLEET_RIG_NAME": "rig-08"})
    assert from_env.rig.display_name() == "rig-08"
    assert Settings().rig.display_name() == socket.gethostname()


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: no such file"):
        load_settings(tmp_path / "nope.toml", environ={})


def test_bad_environment_value_blames_the_variable_not_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[poll]\ninterval_s = 2\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={"CMPFLEET_POLL_INTERVAL_S": "soon"})
    assert str(caught.value).startswith("environment CMPFLEET_POLL_INTERVAL_S: poll.interval_s: ")
    with pytest.raises(ConfigError, match=r"^environment CMPFLEET_RIG_X: unknown key 'rig\.x'$"):
        load_settings(path, environ={"CMPFLEET_RIG_X": "1"})
    with pytest.raises(ConfigError, match=r"^command line: web\.listen: "):
        load_settings(path, environ={}, overrides={"web": {"listen": "8170"}})


def test_warning_limits_must_be_below_critical(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"temperature_warn_c \(95\) must be below temperature_crit_c \(90\)"
    ):
        load_settings(write(tmp_path, "[rig]\ntemperature_warn_c = 95\n"), environ={})


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[poll]\nintervall_s = 2\n", "unknown key 'poll.intervall_s'"),
        ("[rig]\ncard_count = 0\n", "rig.card_count"),
        ('[xid.31]\nexplanation = ""\n', "xid.31.explanation"),
        (
            '[serving]\nrecipe = "/nonexistent/recipe.toml"\n',
            "serving.recipe: /nonexistent/recipe.toml",
        ),
        ('[serving.recipe]\npreset = "dsv4-flash-pp4-dspark"\nspec_tokens = 5\n', "serving.recipe"),
    ],
)
def test_fleetd_refuses_a_bad_config_before_starting(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = write(tmp_path, text)
    state = tmp_path / "state"
    result = run_fleetd("--config", str(path), "--state-dir", str(state))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"fleetd: {path}: ")
    assert needle in lines[0]
    assert not state.exists(), "nothing may start (not even the state dir) on a bad config"


def test_the_defaults_are_the_contracts_and_help_names_them() -> None:
    """Config /etc/cmpfleet/fleet.toml, state dir /var/lib/cmpfleet, listen 127.0.0.1:8170;
    fleetctl's URL http://127.0.0.1:8170; alert retries back off to at most 30 s."""
    assert Settings().web.listen == "127.0.0.1:8170"
    assert Settings().alerts.retry_max_s == 30.0
    client_help = run_fleetctl("--help", env={"FLEETCTL_URL": ""})
    assert "default: http://127.0.0.1:8170" in " ".join(client_help.stdout.split())
    shown = run_fleetd("--help")
    assert shown.returncode == 0, shown.stderr
    words = " ".join(shown.stdout.split())  # argparse wraps the help to the terminal
    assert "config file (default /etc/cmpfleet/fleet.toml)" in words
    assert "state directory (default /var/lib/cmpfleet)" in words
    assert "(default [web] listen, else 127.0.0.1:8170)" in words


def test_the_default_gate_checks_name_only_checks_that_exist() -> None:
    # KNOWN_CHECK_IDS is the registry's and fleetd's own ids: a default naming a check that
    # is not built (or was renamed) would gate on nothing.
    assert set(DEFAULT_GATE_CHECKS) <= KNOWN_CHECK_IDS
    assert {"host_kernel", "kernel_cmdline", "driver_module", "bar1", "p2p", "memtest"} <= set(
        DEFAULT_GATE_CHECKS
    )
    assert load_settings(None, environ={}).recovery.gate_checks == DEFAULT_GATE_CHECKS
