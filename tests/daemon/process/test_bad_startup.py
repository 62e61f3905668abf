"""fleetd given bad input at 3 a.m.: one line naming what is wrong, nothing stored is lost.

Each case is a real fleetd process that refuses before it serves anything, so no case
needs a running daemon: they take about a second each.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.cli import one_clean_line
from tests.support.fleetd import kill_engine, run_fleetd
from tests.support.nodes import KINDS, make_node
from tests.support.small_disk import _fill, small_fs

# Tens of seconds of real processes: collected first (tests/conftest.py), never started last.
pytestmark = pytest.mark.slow(seconds=5)

__all__ = ["small_fs"]  # the tmpfs fixture, shared with the store-health tests

EXIT_CONFIG, EXIT_STARTUP = 2, 2  # both a person's to fix: systemd does not retry them


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"[rigg]\n", "unknown key 'rigg' (did you mean 'rig'?)"),
        (b"[rig]\npower_cap = 180\n", "unknown key 'rig.power_cap' (did you mean 'power_cap_w'?)"),
        (b'[[alerts.webhooks]]\nurll = "http://x/"\n', "unknown key 'alerts.webhooks[0].urll'"),
        (b"rig = 5\n", "rig: expected a table (got 5)"),
        (b'[[alerts.webhooks]]\nurl = "notaurl"\n', "url: expected an http:// or https:// URL"),
        (b"[poll]\ninterval_s = -1\n", "poll.interval_s: Input should be greater than or equal"),
        (b"\xff\xfe[rig]\n", "not UTF-8 text (byte 0xff at offset 0): is it the config file?"),
        (None, "is a directory, not a config file"),
    ],
    ids=[
        "typo-section",
        "typo-key",
        "typo-before-missing",
        "wrong-type-section",
        "bad-url",
        "negative",
        "binary",
        "directory",
    ],
)
def test_a_bad_config_is_one_line_naming_file_and_key(
    tmp_path: Path, content: bytes | None, words: str
) -> None:
    config = tmp_path / "fleet.toml"
    if content is None:
        config.mkdir()
    else:
        config.write_bytes(content)
    state_dir = tmp_path / "state"
    result = run_fleetd("--config", str(config), "--state-dir", str(state_dir))
    assert result.returncode == EXIT_CONFIG, result.stderr
    line = one_clean_line(result.stderr, "fleetd")
    assert line.startswith(f"fleetd: {config}: "), line
    assert words in line
    assert "Value error" not in line and "RigProfile" not in line  # pydantic's internals
    assert not state_dir.exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--bogus"], "fleetd: unrecognized arguments: --bogus (see fleetd --help)"),
        (["--simulate"], "argument --simulate: expected one argument (see fleetd --help)"),
        (["--listen", "nonsense"], "web.listen: expected HOST:PORT, got 'nonsense'"),
    ],
)
def test_a_usage_error_is_one_line_with_a_hint(args: list[str], words: str) -> None:
    result = run_fleetd(*args)
    assert result.returncode == EXIT_CONFIG
    assert words in one_clean_line(result.stderr, "fleetd")


def test_a_state_dir_that_is_a_file_is_named(tmp_path: Path) -> None:
    a_file = tmp_path / "state"
    a_file.write_text("not a directory\n")
    result = run_fleetd("--simulate", "healthy", "--state-dir", str(a_file))
    assert result.returncode == EXIT_STARTUP
    assert one_clean_line(result.stderr, "fleetd") == (
        f"fleetd: state dir {a_file} is a file, not a directory: see --state-dir"
    )
    assert a_file.read_text() == "not a directory\n"


def test_a_damaged_database_is_left_alone_and_the_way_out_is_said(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    garbage = bytes(range(256)) * 64
    (state_dir / "fleet.db").write_bytes(garbage)
    result = run_fleetd("--simulate", "healthy", "--state-dir", str(state_dir))
    assert result.returncode == EXIT_STARTUP
    line = one_clean_line(result.stderr, "fleetd")
    db = state_dir / "fleet.db"
    assert "file is not a database" in line
    assert f"move it aside, e.g. mv {db} {db}.bad, and fleetd starts a fresh history" in line
    assert db.read_bytes() == garbage
    assert not list(state_dir.glob("fleet.db?*")), "fleetd made files beside the damaged one"


def test_a_listen_address_in_use_is_one_line_and_nothing_starts(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        state_dir = tmp_path / "state"
        try:
            result = run_fleetd(
                "--simulate",
                "healthy",
                "--state-dir",
                str(state_dir),
                "--listen",
                f"127.0.0.1:{port}",
            )
        finally:
            kill_engine(state_dir)
    assert result.returncode == EXIT_STARTUP
    line = one_clean_line(result.stderr, "fleetd")
    assert line.startswith(
        f"fleetd: cannot listen on 127.0.0.1:{port}: Address already in use (another fleetd"
    ), line
    # Refused before the store, the host or the engine: only the state dir's lock is there.
    assert [path.name for path in state_dir.iterdir()] == ["fleetd.lock"]


@pytest.mark.parametrize("kind", ["fifo", "char-device", "socket", "symlink-loop"])
def test_a_config_path_that_is_no_file_is_one_line(tmp_path: Path, kind: str) -> None:
    """A FIFO hung fleetd, /dev/zero was read without end, a loop of links tracebacked."""
    config = tmp_path / "fleet.toml"
    if kind == "symlink-loop":
        config.symlink_to(config)
        what = "a loop of symbolic links"
    else:
        make_node(kind, config)
        what = KINDS[kind]
    state_dir = tmp_path / "state"
    result = run_fleetd("--config", str(config), "--state-dir", str(state_dir), timeout_s=30)
    assert result.returncode == EXIT_CONFIG
    assert (
        one_clean_line(result.stderr, "fleetd") == f"fleetd: {config}: is {what}, not a config file"
    )
    assert not state_dir.exists()


def test_a_full_disk_at_start_is_one_line(small_fs: Path) -> None:
    """A state dir on a full filesystem (a small tmpfs, filled): one line, no traceback."""
    (small_fs / "state").mkdir(mode=0o700)
    _fill(small_fs)  # every free block taken
    result = run_fleetd(
        "--simulate", "healthy", "--state-dir", str(small_fs / "state"), timeout_s=30
    )
    assert result.returncode == EXIT_STARTUP
    line = one_clean_line(result.stderr, "fleetd")
    assert "No space left on device" in line, line
