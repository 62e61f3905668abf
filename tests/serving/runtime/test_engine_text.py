"""Engine text reaches terminals and log lines only printable and bounded (issue 36)."""

from __future__ import annotations

from pathlib import Path

from serving.runtime.logcapture import LogCapture
from serving.runtime.provenance import (
    OUTPUT_CHARS,
    VERSION_CHARS,
    output_text,
    parse_version,
    picked_labels,
    printable,
)


def test_control_characters_are_escaped_never_passed() -> None:
    assert printable("0.11\x1b[2J\x1b]0;owned\x07", 100) == "0.11\\x1b[2J\\x1b]0;owned\\x07"
    assert printable("v1\nINFO fleetd: forged", 100) == "v1\\x0aINFO fleetd: forged"
    assert printable("a\x7fb\x9bc", 100) == "a\\x7fb\\x9bc"  # DEL and the C1 CSI too
    assert printable("ünï ✓", 100) == "ünï ✓"  # printable text is kept as it is


def test_the_version_labels_and_output_are_printable_and_bounded() -> None:
    assert parse_version({"version": "0.11.0\n\x1b[31mERROR"}) == "0.11.0\\x0a\\x1b[31mERROR"
    assert len(parse_version({"version": "9" * 10_000}) or "") == VERSION_CHARS + 3
    labels = picked_labels({"patches": "0007\x1b[1m", "other": "x"}, ["patches"])
    assert labels == {"patches": "0007\\x1b[1m"}
    # A multi-line command output keeps its lines, never an escape sequence.
    assert output_text("line one\nline\x1b[2K two\n") == "line one\nline\\x1b[2K two"
    assert len(output_text("x" * 5000)) == OUTPUT_CHARS + 3


def test_the_engines_last_log_line_is_printable(tmp_path: Path) -> None:
    """The progress line ``fleetctl start`` rewrites in place on a terminal."""
    log = tmp_path / "engine.log"
    log.write_bytes(b"Loading weights \x1b[2J\x1b]0;owned\x07 50%\n")
    capture = LogCapture(log, tail_lines=10)
    capture.poll()
    assert capture.last_line == "Loading weights \\x1b[2J\\x1b]0;owned\\x07 50%"
    with log.open("ab") as raw:
        raw.write(b"\x1b[31mprogress in flight")  # no line end yet
    capture.poll()
    assert capture.last_line == "\\x1b[31mprogress in flight"
