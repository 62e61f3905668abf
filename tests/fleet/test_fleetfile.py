"""The fleet file: every mistake is one line naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.cli.fleet.file import FleetFileError, Rig, load_fleet
from tests.support.cli import run_fleetctl_here

GOOD = """
[rigs.rig1]
url = "http://rig1.lan:8170/"

[rigs.rig2]
url = "https://10.0.0.2:8443"
token_file = "tokens/rig2"

[rigs.rig3]
url = "http://127.0.0.1:8170"
token_file = "/etc/cmpfleet/rig3-token"
"""


def test_a_good_fleet_file_keeps_its_order_and_resolves_token_files(tmp_path: Path) -> None:
    path = tmp_path / "rigs.toml"
    path.write_text(GOOD)
    assert load_fleet(path) == [
        Rig("rig1", "http://rig1.lan:8170", None),
        Rig("rig2", "https://10.0.0.2:8443", tmp_path / "tokens/rig2"),
        Rig("rig3", "http://127.0.0.1:8170", Path("/etc/cmpfleet/rig3-token")),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[rigs.a\n", "not valid TOML: "),
        ("", "rigs: expected at least one [rigs.NAME] table"),
        ("[rigs]\n", "rigs: expected at least one [rigs.NAME] table"),
        ("rigs = 3\n", "rigs: expected at least one [rigs.NAME] table"),
        ('[rig.a]\nurl = "http://a:1"\n', "rig: unknown key (expected [rigs.NAME] tables)"),
        ("[rigs]\na = 1\n", "rigs.a: expected a table with url and optional token_file"),
        ("[rigs.a]\n", "rigs.a.url: expected a URL string such as http://rig1:8170"),
        ("[rigs.a]\nurl = 8170\n", "rigs.a.url: expected a URL string such as http://rig1:8170"),
        (
            '[rigs.a]\nurl = "rig1:8170"\n',
            "rigs.a.url: 'rig1:8170' is not an http(s)://HOST[:PORT] URL",
        ),
        (
            '[rigs.a]\nurl = "ftp://rig1"\n',
            "rigs.a.url: 'ftp://rig1' is not an http(s)://HOST[:PORT] URL",
        ),
        (
            '[rigs.a]\nurl = "http://a:1"\ntoken = "x"\n',
            "rigs.a.token: unknown key (expected url, token_file)",
        ),
        (
            '[rigs.a]\nurl = "http://a:1"\ntoken_file = 5\n',
            "rigs.a.token_file: expected a path string",
        ),
    ],
)
def test_each_mistake_names_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "rigs.toml"
    path.write_text(text)
    with pytest.raises(FleetFileError) as caught:
        load_fleet(path)
    assert str(caught.value).startswith(f"{path}: {message}")
    assert "\n" not in str(caught.value)


def test_a_bad_fleet_file_is_one_line_and_unknown_for_fleet_status(tmp_path: Path) -> None:
    path = tmp_path / "rigs.toml"
    path.write_text('[rigs.rig1]\nurl = "rig1.lan"\n')
    human = run_fleetctl_here("fleet", "status", "--fleet", str(path))
    assert (human.returncode, human.stdout) == (3, "")
    assert human.stderr == (
        f"fleetctl: {path}: rigs.rig1.url: 'rig1.lan' is not an http(s)://HOST[:PORT] URL\n"
    )
    scripted = run_fleetctl_here(
        "fleet", "status", "--json", "--fleet", str(tmp_path / "none.toml")
    )
    assert scripted.returncode == 3
    assert json.loads(scripted.stdout)["overall"] == "unknown"
    assert scripted.stderr == f"fleetctl: {tmp_path / 'none.toml'}: no such fleet file\n"


def test_the_default_fleet_file_lives_under_xdg_config_home(tmp_path: Path) -> None:
    result = run_fleetctl_here("fleet", "status", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert result.returncode == 3
    assert result.stderr == f"fleetctl: {tmp_path}/cmpfleet/rigs.toml: no such fleet file\n"
