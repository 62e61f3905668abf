"""Profiles in the config: [serving.recipe] stays the profile "default", [serving.profiles.NAME]
add others, [serving] profile names the one autostarted; every mistake is one line naming
the key; the profile in force outlives a restart unless the config's choice changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import ConfigError, load_settings
from daemon.engine.profiles import ActiveProfile, profiles_for, resolve_profiles
from serving.profiles import Profile, ProfileSet
from serving.recipe.recipe import RecipeError, recipe_from_table
from serving.sim.scenario import EngineScenario
from tests.support.fleetd import run_fleetd


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[serving]\nprofile = "nosuch"\n[serving.profiles.a]\nmodel = "m"\n',
            "serving: profile 'nosuch' names no profile (known: a)",
        ),
        (
            '[serving]\nprofile = "x"\n[serving.recipe]\nmodel = "m"\n',
            "serving: profile 'x' names no profile (known: default)",
        ),
        (
            '[serving.recipe]\nmodel = "m"\n[serving.profiles.default]\nmodel = "n"\n',
            "serving: [serving] recipe is the profile 'default': "
            "[serving.profiles.default] would be a second one",
        ),
        (
            '[serving.profiles.a]\nrecipe = "a.toml"\nport = 1\n',
            "serving.profiles: profile 'a': give recipe = \"path\" or recipe keys, not both (port)",
        ),
        (
            '[serving.profiles."a b"]\nmodel = "m"\n',
            "serving.profiles: profile name 'a b': letters, digits, '.', '_', '-'",
        ),
        (
            '[[serving.log_signatures]]\nname = "oops"\npattern = "(unclosed"\n',
            "serving.log_signatures[0].pattern: not a valid regular expression: "
            "missing ), unterminated subpattern at position 0",
        ),
        (
            '[[serving.log_signatures]]\nname = "x"\npattern = "y"\nseverity = "loud"\n',
            "serving.log_signatures[0].severity: Input should be 'info', 'warning' or 'critical'",
        ),
    ],
)
def test_a_profile_mistake_is_one_line_naming_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_settings(path, environ={})
    assert str(raised.value).startswith(f"{path}: {message}")


def test_fleetd_refuses_a_bad_profile_before_starting(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[serving.profiles.a]\npreset = "sim-engine"\n'
        '[serving.profiles.b]\npreset = "sim-engine"\nport = "x"\n',
    )
    state = tmp_path / "state"
    result = run_fleetd("--config", str(path), "--state-dir", str(state))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"fleetd: {path}: serving.profiles.b: [serving.profiles.b]: key 'port': "
        'should be an integer (got "x")'
    ]
    assert not state.exists()


def test_a_waiver_of_an_id_no_rule_has_is_refused_like_any_bad_profile(tmp_path: Path) -> None:
    """It used to let fleetd start, then refuse autostart as a lint error (issue 33)."""
    config = write(
        tmp_path,
        '[serving.profiles.a]\npreset = "sim-engine"\n'
        '[serving.profiles.a.lint]\nwaive = { "gpu-memory-hihg" = "measured on this rig" }\n',
    )
    with pytest.raises(RecipeError) as raised:
        resolve_profiles(load_settings(config, environ={}), tmp_path, None)
    message = str(raised.value)
    assert message.startswith("serving.profiles.a: lint.waive: no lint rule has the id ")
    assert "'gpu-memory-hihg' (did you mean 'gpu-memory-high'?)" in message
    state = tmp_path / "state"
    result = run_fleetd("--config", str(config), "--state-dir", str(state))
    assert result.returncode == 2
    assert result.stderr.strip() == f"fleetd: {config}: {message}"
    assert not state.exists()


def test_recipe_is_the_default_profile_and_profiles_keep_their_order(tmp_path: Path) -> None:
    (tmp_path / "glm.toml").write_text('model = "/models/glm"\nport = 9000\n')
    text = (
        '[serving]\nprofile = "glm"\n[serving.recipe]\nmodel = "/models/dsv4"\n'
        '[serving.profiles.glm]\nrecipe = "glm.toml"\n[serving.profiles.qwen]\nmodel = "q"\n'
    )
    settings = load_settings(write(tmp_path, text), environ={})
    profiles = profiles_for(settings, tmp_path / "fleet.toml", None)
    assert profiles is not None
    assert profiles.names == ["default", "glm", "qwen"]
    assert profiles.configured == "glm"
    glm = profiles.get("glm")
    assert (glm.recipe.port, glm.source) == (9000, str(tmp_path / "glm.toml"))
    assert profiles.get("qwen").source == "[serving.profiles.qwen]"


@pytest.mark.parametrize(
    ("text", "simulated", "names", "configured"),
    [
        ("", True, ["default"], "default"),  # the simulated engine
        ("", False, None, None),  # a real rig with no recipe: no engine
        # Under --simulate a configured profile is one more, never a silent replacement of
        # the simulated default (issue 37): in force only when [serving] profile names it.
        (
            '[serving.profiles.a]\nmodel = "m"\n[serving.profiles.b]\nmodel = "n"\n',
            True,
            ["default", "a", "b"],
            "default",
        ),
        (
            '[serving]\nprofile = "a"\n[serving.profiles.a]\nmodel = "m"\n',
            True,
            ["default", "a"],
            "a",
        ),
        (
            '[serving.profiles.a]\nmodel = "m"\n[serving.profiles.b]\nmodel = "n"\n',
            False,
            ["a", "b"],
            "a",
        ),
        (
            '[serving]\nprofile = "default"\n[serving.profiles.a]\nmodel = "m"\n',
            True,
            ["default", "a"],
            "default",
        ),
    ],
)
def test_which_profiles_exist_and_which_is_autostarted(
    tmp_path: Path, text: str, simulated: bool, names: list[str] | None, configured: str | None
) -> None:
    settings = load_settings(write(tmp_path, text), environ={})
    profiles = profiles_for(
        settings, tmp_path / "fleet.toml", EngineScenario() if simulated else None
    )
    if names is None:
        assert profiles is None
        return
    assert profiles is not None
    assert (profiles.names, profiles.configured) == (names, configured)


def test_default_without_a_recipe_on_a_real_rig_is_an_error(tmp_path: Path) -> None:
    settings = load_settings(
        write(tmp_path, '[serving]\nprofile = "default"\n[serving.profiles.a]\nmodel = "m"\n'),
        environ={},
    )
    with pytest.raises(RecipeError, match=r"^serving.profile: 'default' names no recipe$"):
        resolve_profiles(settings, tmp_path, None)


def two_profiles(configured: str) -> ProfileSet:
    recipe = recipe_from_table({"model": "m"}, "t")
    return ProfileSet([Profile("a", recipe, "[a]"), Profile("b", recipe, "[b]")], configured)


@pytest.mark.parametrize(
    ("saved", "configured_now", "in_force"),
    [
        (None, "a", "a"),  # nothing saved: the config's choice
        (("b", "a"), "a", "b"),  # a person switched to b: kept across restarts
        (("b", "a"), "b", "b"),
        (("a", "b"), "a", "a"),  # the config was edited since the switch: it wins
        (("gone", "a"), "a", "a"),  # the switched-to profile was removed
    ],
)
def test_the_profile_in_force(
    tmp_path: Path, saved: tuple[str, str] | None, configured_now: str, in_force: str
) -> None:
    active = ActiveProfile(tmp_path)
    if saved is not None:
        profile, configured = saved
        (tmp_path / "profile.json").write_text(
            f'{{"profile": "{profile}", "configured": "{configured}"}}'
        )
    assert active.choose(two_profiles(configured_now)) == in_force


def test_the_choice_is_saved_private(tmp_path: Path) -> None:
    ActiveProfile(tmp_path).save("b", two_profiles("a"))
    assert (tmp_path / "profile.json").stat().st_mode & 0o777 == 0o600
    assert ActiveProfile(tmp_path).choose(two_profiles("a")) == "b"
