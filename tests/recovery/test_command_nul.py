"""A host command with an embedded NUL is refused at config load, not when the reboot is
due (issue 36): exec cannot pass it."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import ConfigError, load_settings


@pytest.mark.parametrize("key", ["reboot_command", "power_cycle_command"])
def test_a_nul_in_a_host_command_is_one_line_at_load(tmp_path: Path, key: str) -> None:
    config = tmp_path / "fleet.toml"
    config.write_text(f'[recovery]\n{key} = ["systemctl", "reb\\u0000oot"]\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    said = str(caught.value)
    assert f"recovery.{key}: an argument holds a NUL character" in said
    assert "\n" not in said
