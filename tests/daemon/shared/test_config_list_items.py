"""Strict types inside lists too: ``[canary] depths = ["16000"]`` is refused (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import ConfigError, load_settings


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('[canary]\ndepths = ["16000"]', "canary.depths[0]: expected a number, not the string"),
        (
            "[canary]\ndepths = [16000, true]",
            "canary.depths[1]: expected a number, not the boolean",
        ),
    ],
)
def test_a_wrong_type_inside_a_list_is_one_line(tmp_path: Path, body: str, said: str) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(body)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_numbers_in_a_list_are_read(tmp_path: Path) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text("[canary]\ndepths = [64000, 16000]")
    assert load_settings(config).canary.depths == [16000, 64000]
