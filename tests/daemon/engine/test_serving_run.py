"""``[serving] run`` (issue 42): profiles that would share a card or a port are refused at
config load in one line naming both; one name is the profile in force; several disjoint
ones are accepted (the first is the profile in force, the others run beside it); fleetd
refuses a clash before it starts, exit 2, the same line."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import ConfigError, load_settings
from daemon.engine.profiles import resolve_profiles
from serving.engines import side_profiles
from serving.recipe.recipe import RecipeError
from tests.support.fleetd import run_fleetd

TWO = (
    '[serving.profiles.dsv4]\nmodel = "/models/dsv4"\ngpus = "{a}"\nport = {pa}\n'
    '[serving.profiles.qwen]\nmodel = "/models/qwen"\ngpus = "{b}"\nport = {pb}\n'
)


def _config(tmp_path: Path, run: str, a: str, b: str, pa: int = 8000, pb: int = 8001) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(f"[serving]\nrun = {run}\n" + TWO.format(a=a, b=b, pa=pa, pb=pb))
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(RecipeError) as raised:
        resolve_profiles(load_settings(path, environ={}), path.parent, None)
    return str(raised.value)


@pytest.mark.parametrize(
    ("a", "b", "pa", "pb", "message"),
    [
        (
            "0,1,2,3",
            "3,4,5",
            8000,
            8001,
            "serving.run: profiles 'dsv4' and 'qwen' both use card 3: "
            "give each engine its own cards",
        ),
        (
            "all",
            "4,5,6,7",
            8000,
            8001,
            "serving.run: profiles 'dsv4' and 'qwen' would share cards: 'dsv4' uses every "
            'card (gpus = "all"); give each its own cards',
        ),
        (
            "0,1,2,3",
            "4,5,6,7",
            8000,
            8000,
            "serving.run: profiles 'dsv4' and 'qwen' both listen on port 8000: "
            "give each engine its own port",
        ),
    ],
)
def test_a_shared_card_or_port_is_one_line_naming_both_profiles(
    tmp_path: Path, a: str, b: str, pa: int, pb: int, message: str
) -> None:
    assert _refusal(_config(tmp_path, '["dsv4", "qwen"]', a, b, pa, pb)) == message


def test_disjoint_profiles_run_side_by_side_the_first_in_force(tmp_path: Path) -> None:
    path = _config(tmp_path, '["qwen", "dsv4"]', "0,1,2,3", "4,5,6,7")
    settings = load_settings(path, environ={})
    profiles = resolve_profiles(settings, tmp_path, None)
    assert profiles is not None and profiles.configured == "qwen"
    assert side_profiles(settings.serving.run) == ("dsv4",)


def test_one_name_is_the_profile_in_force(tmp_path: Path) -> None:
    path = _config(tmp_path, '["qwen"]', "0,1,2,3", "0,1,2,3")  # only one runs: no clash
    settings = load_settings(path, environ={})
    profiles = resolve_profiles(settings, tmp_path, None)
    assert profiles is not None and profiles.configured == "qwen"


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ('["nosuch"]', "serving.run: 'nosuch' names no profile (known: dsv4, qwen)"),
    ],
)
def test_an_unknown_name_is_one_line(tmp_path: Path, run: str, message: str) -> None:
    assert _refusal(_config(tmp_path, run, "0", "1")) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[serving]\nrun = ["a", "a"]\n', "serving.run: names a twice"),
        ("[serving]\nrun = []\n", "serving.run:"),
        (
            '[serving]\nrun = ["a"]\nprofile = "b"\n',
            "serving: [serving] profile 'b' and run ['a'] disagree: give one",
        ),
    ],
)
def test_a_bad_run_list_is_one_line_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_settings(path, environ={})
    assert str(raised.value).startswith(f"{path}: {message}"), str(raised.value)


def test_fleetd_refuses_overlapping_profiles_before_it_starts(tmp_path: Path) -> None:
    path = _config(tmp_path, '["dsv4", "qwen"]', "0,1,2,3", "2,3,4,5")
    state = tmp_path / "state"
    result = run_fleetd("--config", str(path), "--state-dir", str(state), "--simulate", "healthy-8")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"fleetd: {path}: serving.run: profiles 'dsv4' and 'qwen' both use cards 2, 3: "
        "give each engine its own cards"
    ]
