"""The unit file: hardened (exposure at most 5.0), verified, and fleetd runs under its limits.

systemd is not PID 1 on the machines the suite runs on, so the unit cannot be started.
What is checked instead: ``systemd-analyze verify`` and ``security --offline=true`` on the
unit as ``fleetd install`` writes it (ExecStart = a real fleetd), that every sandboxing
option systemd rates and the unit leaves out is named with its reason, and a real fleetd
with its simulated engine (a child, as a bare vLLM is) reaching ``ready`` under the
unit's capability bounding set, no_new_privs, umask, descriptor limit, environment and
read-only /usr, /boot and /etc in a private mount namespace (``unshare``, ``setpriv``,
``prlimit``). The seccomp filters, namespace and address-family restrictions are rated
by systemd-analyze but not exercised here.
"""

from __future__ import annotations

import configparser
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.install.installer import packaged_unit, unit_text
from tests.support.external import require_program, require_root
from tests.support.fleetd import Fleetd, start_fleetd, stop_all, wait_until
from tests.support.systemd_analyze import MAX_EXPOSURE, analyze, exposure

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "daemon" / "install" / "fleetd.service"


def unit_settings() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNIT)
    return parser


def unit_values(key: str) -> list[str]:
    """Every value of ``key`` in the unit (``Environment=`` may repeat)."""
    prefix = f"{key}="
    return [
        line[len(prefix) :] for line in UNIT.read_text().splitlines() if line.startswith(prefix)
    ]


def comments() -> str:
    return "\n".join(line for line in UNIT.read_text().splitlines() if line.startswith("#"))


@pytest.fixture(scope="module")
def installed_unit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unit as ``fleetd install`` writes it: ExecStart is this venv's real fleetd."""
    fleetd = Path(sys.executable).with_name("fleetd")
    assert fleetd.exists(), f"{fleetd} missing: is cmpfleet installed in this venv?"
    unit = tmp_path_factory.mktemp("unit") / "fleetd.service"
    unit.write_text(unit_text(fleetd))
    return unit


def test_the_checkout_links_the_packaged_unit() -> None:
    linked = ROOT / "systemd" / "fleetd.service"
    assert linked.resolve() == UNIT.resolve()
    assert packaged_unit() == UNIT.read_text()


def test_systemd_analyze_verify_passes(installed_unit: Path) -> None:
    result = analyze("verify", str(installed_unit))
    assert result.returncode == 0, result.stderr
    assert "fleetd.service" not in result.stderr, result.stderr


def test_the_unit_is_rated_at_most_5(installed_unit: Path) -> None:
    score, _ = exposure(installed_unit)
    assert score <= MAX_EXPOSURE, f"exposure {score} > {MAX_EXPOSURE}"


def test_every_option_left_out_says_why(installed_unit: Path) -> None:
    _, missing = exposure(installed_unit)
    said = comments()
    kept_caps = unit_settings()["Service"]["CapabilityBoundingSet"].split()
    families = unit_settings()["Service"]["RestrictAddressFamilies"].split()
    unexplained = [cap for cap in kept_caps if cap not in said]
    unexplained += [family for family in families if family not in said]
    for option in missing:
        name, _, value = option.partition("=")
        if name in ("CapabilityBoundingSet", "RestrictAddressFamilies"):
            continue  # each capability and family kept is named above, with its reason
        if name == "SystemCallFilter":
            group = value.lstrip("~")  # e.g. @resources
            if group not in said:
                unexplained.append(option)
        elif f"{name}=" not in said:
            unexplained.append(option)
    assert unexplained == [], f"left out or kept without a reason in the unit: {unexplained}"


def test_unit_keeps_the_engine_alive_and_stops_retrying_a_bad_config() -> None:
    service = unit_settings()["Service"]
    assert service["Type"] == "notify"
    assert service["KillMode"] == "process"
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == "2"  # bad config / start-up: a person acts
    assert int(service["WatchdogSec"]) >= 10
    assert int(service["RestartSec"]) >= 1, "RestartSec=100ms exhausts StartLimitBurst at once"
    # Above fleetd's own graceful shutdown plus an engine stop (stop_timeout_s twice).
    assert int(service["TimeoutStopSec"]) > 2 * 60
    assert int(service["LimitNOFILE"]) >= 65536
    # Root has every capability it is bounded to: an ambient one would be a no-op line.
    assert "AmbientCapabilities" not in service
    assert "PrivateTmp" not in service and "PrivateDevices" not in service  # the engine's
    assert "MemoryDenyWriteExecute" not in service


def _sandboxed(service: configparser.SectionProxy) -> list[str]:
    """A command prefix applying the unit's limits that work without systemd as PID 1."""
    for program, package in (("unshare", "util-linux"), ("setpriv", "util-linux")):
        require_program(program, package)
    require_program("prlimit", "util-linux")
    caps = ",".join(
        "+" + cap.removeprefix("CAP_").lower() for cap in service["CapabilityBoundingSet"].split()
    )
    assert service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "full"
    read_only = "for d in /usr /boot /efi /etc; do [ -d $d ] || continue; " + (
        'mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 97; done; exec "$@"'
    )
    # The unit's descriptor limit, as far as this machine lets a test raise it.
    nofile = min(int(service["LimitNOFILE"]), resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    return [
        "unshare",
        "--mount",
        "--propagation",
        "slave",
        "sh",
        "-c",
        read_only,
        "sh",
        "prlimit",
        f"--nofile={nofile}:{nofile}",
        "setpriv",
        "--no-new-privs",
        "--inh-caps=-all",
        f"--bounding-set=-all,{caps}",
        "--",
    ]


@pytest.fixture
def sandboxed(tmp_path: Path) -> Iterator[Fleetd]:
    require_root("unshare and setpriv change mounts and the capability bounding set")
    service = unit_settings()["Service"]
    umask = int(service["UMask"], 8)
    env = dict(value.split("=", 1) for value in unit_values("Environment"))
    assert "CONTAINER_HOST" in env
    config = tmp_path / "fleet.toml"
    config.write_text("[serving]\nprobe_interval_s = 0.3\n")
    daemon = start_fleetd(
        tmp_path,
        tmp_path / "state",
        config=config,
        env=env,
        umask=umask,
        wrapper=_sandboxed(service),
    )
    try:
        yield daemon
    finally:
        stop_all([daemon])


def test_fleetd_and_its_engine_run_under_the_units_limits(sandboxed: Fleetd) -> None:
    daemon = sandboxed
    wait_until(
        lambda: daemon.get("/api/v1/status").json()["serving"]["state"] == "ready",
        30,
        "the simulated engine ready under the unit's limits",
    )
    status = daemon.get("/api/v1/status").json()
    pid = status["serving"]["pid"]
    engine = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":\t", 1) for line in engine.splitlines() if ":\t" in line)
    assert fields["NoNewPrivs"].strip() == "1"  # the engine inherits the sandbox
    fleetd = Path(f"/proc/{daemon.proc.pid}/status").read_text()
    bounded = int(fleetd.split("CapBnd:\t")[1].split()[0], 16)
    ours = int(Path("/proc/self/status").read_text().split("CapBnd:\t")[1].split()[0], 16)
    assert int(fields["CapBnd"], 16) == bounded and bounded & ours == bounded != ours
    assert status["overall"] == "ok"
    assert (daemon.state_dir / "api-token").stat().st_mode & 0o077 == 0
