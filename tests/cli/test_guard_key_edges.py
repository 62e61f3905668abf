"""``fleetctl guard key``'s edges: bounded stdin, visible ASCII keys, ASCII names (issue 36)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.config import load_settings
from tests.support.cli import run_fleetctl_here


def _key(name: str, stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    argv = [sys.executable, "-m", "daemon.fleetctl", "guard", "key", name]
    if stdin is not None:
        argv.append("--stdin")
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("stdin", "said"),
    [
        (b"\0" * (200 * 1024 * 1024), b"over 1024 characters"),
        (b"\0" * 40 + b"\n", b"visible ASCII characters only"),
        (b"cmpg-" + "é".encode() * 30 + b"\n", b"visible ASCII characters only"),
        (b"cmpg-\xff\xfe" + b"x" * 30 + b"\n", b"not UTF-8 text"),
        (b"two words and more than enough characters\n", b"visible ASCII characters only"),
    ],
    ids=["200-mb-of-nul", "nul", "non-ascii", "invalid-utf8", "space"],
)
def test_a_bad_key_on_stdin_is_one_line(stdin: bytes, said: bytes) -> None:
    result = _key("laptop", stdin)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], result.stderr[:500]
    assert b"Traceback" not in result.stderr


def test_a_non_ascii_name_is_refused_before_any_table() -> None:
    result = run_fleetctl_here("guard", "key", "laptöp")
    assert result.returncode == 2
    assert "ASCII letters" in result.stderr
    assert "[[guard.keys]]" not in result.stdout


def test_a_good_key_from_stdin_gives_a_table_fleetd_accepts(tmp_path: Path) -> None:
    result = _key("ci.runner-1", b"my-own-key-with-enough-characters-42\n")
    assert result.returncode == 0, result.stderr
    table = result.stdout.decode().split("restart fleetd:\n", 1)[1]
    config = tmp_path / "fleet.toml"
    config.write_text('[guard]\nlisten = "127.0.0.1:8098"\n' + table)
    assert load_settings(config).guard.keys[0].name == "ci.runner-1"
