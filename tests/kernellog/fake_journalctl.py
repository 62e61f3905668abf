"""A stand-in ``journalctl`` for tests: replays recorded ``-o json`` entries.

Installed first on PATH by the tests (a fake at a real boundary: the program we spawn).
It reads ``$FAKE_JOURNAL_DIR/entries.jsonl`` (recorded journald JSON, one entry a line),
appends its argv to ``argv.jsonl`` (and, once it follows, a line to ``following.jsonl``), honours ``--after-cursor``, ``-n 0`` and ``-f`` (then
it keeps printing lines appended to ``entries.jsonl`` until it is terminated), and fails
like the real one ("No journal files were found.", status 1) when ``fail`` exists there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

FOLLOW_POLL_S = 0.02


def _entries_after(lines: list[str], cursor: str) -> list[str]:
    for index, line in enumerate(lines):
        if json.loads(line).get("__CURSOR") == cursor:
            return lines[index + 1 :]
    print(f"Failed to seek to cursor: {cursor}", file=sys.stderr)
    raise SystemExit(1)


def main(argv: list[str]) -> int:
    state = Path(os.environ["FAKE_JOURNAL_DIR"])
    with (state / "argv.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\n")
    if (state / "fail").exists():
        print("No journal files were found.", file=sys.stderr)
        return 1
    entries = state / "entries.jsonl"
    data = entries.read_bytes()
    lines = [line for line in data.decode().splitlines() if line.strip()]
    if "--after-cursor" in argv:
        shown = _entries_after(lines, argv[argv.index("--after-cursor") + 1])
    elif "-n" in argv and argv[argv.index("-n") + 1] == "0":
        shown = []
    else:
        shown = lines
    for line in shown:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if "-f" not in argv:
        return 0
    position = len(data)
    # Tells a test that this run has read the journal as it was: an entry appended from
    # now on is "new" to it (``-n 0`` starts at the end a real journalctl also sees).
    with (state / "following.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"argv": argv, "position": position}) + "\n")
    while True:
        size = entries.stat().st_size
        if size > position:
            with entries.open("rb") as stream:
                stream.seek(position)
                chunk = stream.read(size - position)
            position += len(chunk)
            sys.stdout.write(chunk.decode())
            sys.stdout.flush()
        time.sleep(FOLLOW_POLL_S)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
