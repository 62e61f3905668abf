"""A fake ``docker``/``podman`` CLI for tests: a fake at the real boundary (the runtime's CLI).

The tests copy this file into a temporary ``bin/docker`` with a shebang for the running
interpreter and put that directory first on ``PATH``. Every invocation appends its argv to
``$FAKE_DOCKER_STATE/calls.jsonl``. Containers are real processes: ``run`` starts the
command that follows the image name ``$FAKE_DOCKER_IMAGE`` under a small keeper process
that records the exit code, so ``inspect``, ``logs -f``, ``wait``, ``kill --signal``,
``stop -t`` and ``rm -f`` act on something real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

STATE = Path(os.environ["FAKE_DOCKER_STATE"])
IMAGE = os.environ.get("FAKE_DOCKER_IMAGE", "sim-image")
POLL_S = 0.05


def _inherited() -> list[str]:
    """The targets of the descriptors this process was started with, beyond stdio."""
    found: list[str] = []
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                target = os.readlink(f"/proc/self/fd/{name}")
            except OSError:  # the listing's own descriptor, closed by now
                continue
            if not target.startswith("/proc/"):
                found.append(target)
    return found


def _path(name: str) -> Path:
    return STATE / f"container-{name}.json"


def load(name: str) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(_path(name).read_text())
    except FileNotFoundError:
        return None
    return data


def save(name: str, data: dict[str, Any]) -> None:
    temporary = STATE / f".{name}.{uuid.uuid4().hex}"
    temporary.write_text(json.dumps(data))
    os.replace(temporary, _path(name))


def no_such(name: str) -> int:
    sys.stderr.write(f"Error: No such object: {name}\n")
    return 1


def cmd_run(args: list[str]) -> int:
    name = None
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    ports: list[str] = []
    detach = False
    index = 0
    while index < len(args) and args[index] != IMAGE:
        arg = args[index]
        if arg in ("-d", "--detach"):
            detach = True
        elif arg == "--label":
            index += 1
            key, _, value = args[index].partition("=")
            labels[key] = value
        elif arg == "-p":
            index += 1
            ports.append(args[index])
        elif arg == "--name":
            index += 1
            name = args[index]
        elif arg.startswith("--name="):
            name = arg.split("=", 1)[1]
        elif arg in ("-e", "--env"):
            index += 1
            key, _, value = args[index].partition("=")
            env[key] = value
        index += 1
    command = args[index + 1 :]
    if name is None or not command:
        sys.stderr.write("fake docker: run needs --name and a command after the image\n")
        return 125
    existing = load(name)
    if existing is not None:
        sys.stderr.write(f'Error: Conflict. The container name "/{name}" is already in use\n')
        return 125
    container_id = uuid.uuid4().hex + uuid.uuid4().hex
    save(
        name,
        {
            "id": container_id,
            "running": True,
            "exit_code": 0,
            "pid": 0,
            "command": command,
            "env": env,
            "labels": labels,
            "ports": ports,
            "image": IMAGE,
            "log": str(STATE / f"{name}.log"),
        },
    )
    subprocess.Popen(
        [sys.executable, __file__, "_keeper", name],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        data = load(name)
        if data is not None and (data["pid"] or not data["running"]):
            break
        time.sleep(POLL_S)
    print(container_id)
    if not detach:
        return cmd_wait([name])
    return 0


def cmd_keeper(args: list[str]) -> int:
    name = args[0]
    data = load(name)
    assert data is not None
    with open(data["log"], "ab") as log:
        child = subprocess.Popen(
            data["command"],
            env={**os.environ, **data["env"]},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    data["pid"] = child.pid
    save(name, data)
    returncode = child.wait()
    data = load(name)
    if data is None:  # removed with rm -f meanwhile
        return 0
    data["running"] = False
    data["exit_code"] = returncode if returncode >= 0 else 128 - returncode
    data["pid"] = 0
    save(name, data)
    return 0


def cmd_inspect(args: list[str]) -> int:
    fmt = "{{.Id}}"
    names: list[str] = []
    index = 0
    while index < len(args):
        if args[index] in ("--format", "-f"):
            index += 1
            fmt = args[index]
        elif args[index] == "--type":
            index += 1
        else:
            names.append(args[index])
        index += 1
    data = load(names[0])
    if data is None:
        return no_such(names[0])
    text = (
        fmt.replace("{{.Id}}", data["id"])
        .replace("{{.State.Running}}", "true" if data["running"] else "false")
        .replace("{{.State.ExitCode}}", str(data["exit_code"]))
        .replace("{{.State.Pid}}", str(data["pid"]))
        .replace("{{.State.OOMKilled}}", "true" if data.get("oom_killed") else "false")
    )
    for key, value in data.get("labels", {}).items():
        text = text.replace("{{index .Config.Labels " + json.dumps(key) + "}}", value)
    if "{{index .Config.Labels" in text:
        text = "<no value>"
    print(text)
    return 0


def _published(spec: str) -> str:
    """``127.0.0.1:8098:8000`` as docker's ports column shows it."""
    parts = spec.rsplit(":", 2)
    if len(parts) == 3:
        return f"{parts[0]}:{parts[1]}->{parts[2]}/tcp"
    return f"0.0.0.0:{parts[0]}->{parts[-1]}/tcp"


def cmd_ps(args: list[str]) -> int:
    """Running containers as ``ps --format '{{.ID}}\t{{.Names}}\t{{.Image}}\t{{.Ports}}'``."""
    for path in sorted(STATE.glob("container-*.json")):
        data = json.loads(path.read_text())
        if not data["running"]:
            continue
        name = path.stem.removeprefix("container-")
        ports = ", ".join(_published(spec) for spec in data.get("ports", []))
        print(f"{data['id']}\t{name}\t{data.get('image', IMAGE)}\t{ports}")
    return 0


def cmd_logs(args: list[str]) -> int:
    follow = "-f" in args or "--follow" in args
    since = None
    if "--since" in args:
        since = args[args.index("--since") + 1]
    name = args[-1]
    data = load(name)
    if data is None:
        return no_such(name)
    with open(data["log"], "rb") as log:
        if since is not None:
            log.seek(0, os.SEEK_END)
        while True:
            chunk = log.read(65536)
            if chunk:
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
                continue
            if not follow:
                return 0
            current = load(name)
            if current is None or not current["running"]:
                rest = log.read()
                sys.stdout.buffer.write(rest)
                sys.stdout.buffer.flush()
                return 0
            time.sleep(POLL_S)


def cmd_wait(args: list[str]) -> int:
    name = args[-1]
    while True:
        data = load(name)
        if data is None:
            return no_such(name)
        if not data["running"]:
            print(data["exit_code"])
            return 0
        time.sleep(POLL_S)


def _signal_number(text: str) -> int:
    text = text.upper()
    if text.isdigit():
        return int(text)
    return int(getattr(signal, text if text.startswith("SIG") else f"SIG{text}"))


def cmd_kill(args: list[str]) -> int:
    signum = signal.SIGKILL
    if "--signal" in args:
        signum = signal.Signals(_signal_number(args[args.index("--signal") + 1]))
    name = args[-1]
    data = load(name)
    if data is None:
        return no_such(name)
    if not data["running"]:
        sys.stderr.write(f"Error: container {name} is not running\n")
        return 1
    os.kill(data["pid"], signum)
    print(name)
    return 0


def cmd_stop(args: list[str]) -> int:
    timeout_s = 10.0
    for flag in ("-t", "--time", "--timeout"):
        if flag in args:
            timeout_s = float(args[args.index(flag) + 1])
    name = args[-1]
    data = load(name)
    if data is None:
        return no_such(name)
    if data["running"]:
        os.kill(data["pid"], signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            current = load(name)
            if current is None or not current["running"]:
                break
            time.sleep(POLL_S)
        else:
            os.kill(data["pid"], signal.SIGKILL)
    print(name)
    return 0


def cmd_rm(args: list[str]) -> int:
    force = "-f" in args or "--force" in args
    name = args[-1]
    data = load(name)
    if data is None:
        return no_such(name)
    if data["running"]:
        if not force:
            sys.stderr.write(f"Error: cannot remove running container {name}\n")
            return 1
        os.kill(data["pid"], signal.SIGKILL)
    _path(name).unlink()
    print(name)
    return 0


def main() -> int:
    argv = sys.argv[1:]
    STATE.mkdir(parents=True, exist_ok=True)
    if argv and argv[0] != "_keeper":
        with (STATE / "calls.jsonl").open("a") as calls:
            calls.write(json.dumps(argv) + "\n")
        # What this invocation inherited beyond stdio (a leak of fleetd's is a bug).
        found = _inherited()
        with (STATE / "inherited.jsonl").open("a") as inherited:
            inherited.write(json.dumps([argv[0], found]) + "\n")
    commands = {
        "run": cmd_run,
        "_keeper": cmd_keeper,
        "inspect": cmd_inspect,
        "logs": cmd_logs,
        "wait": cmd_wait,
        "kill": cmd_kill,
        "stop": cmd_stop,
        "rm": cmd_rm,
        "ps": cmd_ps,
    }
    if not argv or argv[0] not in commands:
        sys.stderr.write(f"fake docker: unsupported command {argv[:1]}\n")
        return 125
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
