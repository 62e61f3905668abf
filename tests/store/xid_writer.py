"""A kernel-log follower stand-in for the kill -9 test: stores Xids with their cursor.

Run as ``python -m tests.store.xid_writer URL BOOT_ID COUNT``: resumes after the stored
cursor, as the daemon does, and stores one Xid per kernel record with the cursor moving
in the same call, until killed.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from daemon.store import Store, XidRecord
from hwcheck.kernellog.records import KernelLogCursor


def main(argv: list[str]) -> int:
    url, boot_id, count = argv[0], argv[1], int(argv[2])
    store = Store.open(url)
    cursor = store.get_cursor()
    start = cursor.last_seq + 1 if cursor is not None and cursor.boot_id == boot_id else 1
    for seq in range(start, start + count):
        record = XidRecord(
            ts=datetime.now(UTC), xid=31, message=f"Xid 31 #{seq}", boot_id=boot_id, kmsg_seq=seq
        )
        store.record_xid_and_cursor(record, KernelLogCursor(boot_id, seq))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
