"""The kernel's OOM-killer records: did the kernel kill this process for memory?

An engine that ends by SIGKILL (exit status 137) was killed by someone; the kernel's OOM
killer says so in the kernel log, naming the pid (mm/oom_kill.c):

- ``Out of memory: Killed process 4242 (python3) total-vm:...`` (the global OOM killer)
- ``Memory cgroup out of memory: Killed process 4242 (python3) ...`` (a container's limit)
- ``oom-kill:constraint=CONSTRAINT_MEMCG,...,task=python3,pid=4242,uid=0`` (the summary)
- ``oom_reaper: reaped process 4242 (python3), now anon-rss:0kB ...``

Pure functions over record texts: the supervisor reads the kernel log through the host's
sources (the simulated rig's file under ``--simulate``) and asks here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

_OOM_PID_RES = (
    re.compile(r"\bOut of memory: Killed process (?P<pid>[0-9]{1,10})\b", re.IGNORECASE),
    re.compile(r"\boom-kill:.*\bpid=(?P<pid>[0-9]{1,10})\b"),
    re.compile(r"\boom_reaper: reaped process (?P<pid>[0-9]{1,10})\b"),
)


def oom_killed_pid(text: str) -> int | None:
    """The pid an OOM-killer record names; ``None`` when ``text`` is not one."""
    for pattern in _OOM_PID_RES:
        match = pattern.search(text)
        if match is not None:
            return int(match.group("pid"))
    return None


def oom_kill_record(texts: Iterable[str], pids: Collection[int]) -> str | None:
    """The last OOM-killer record naming one of ``pids``; ``None`` when there is none."""
    found: str | None = None
    for text in texts:
        pid = oom_killed_pid(text)
        if pid is not None and pid in pids:
            found = text.strip()
    return found
