"""``fleetctl check``: a one-shot local hardware check with no daemon."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

from daemon.cli.client import ClientError
from daemon.cli.output import Output
from daemon.cli.rig.host_judging import host_judging
from daemon.cli.rig.status import show_lines
from daemon.cli.views.rigview import Screen, rig_body
from daemon.cli.views.screen import SEVERITY_STYLE, Line, Piece
from daemon.config import ConfigError, load_cli_settings, xid_catalogue
from hwcheck.backend import BackendError, BackendUnavailable
from hwcheck.host import HostSources
from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.model import Severity
from hwcheck.oneshot import CheckReport, run_local_check
from hwcheck.sim.scenario import ScenarioError, load_scenario


def render(out: Output, report: CheckReport) -> None:
    """The human form: the verdict with a count, the cards, every check that is not ok."""
    doc = report.document()
    not_ok = sum(1 for check in doc["checks"] if check["severity"] != "ok")
    overall = str(doc["overall"])
    verdict = Line(
        Piece("overall: "),
        Piece(overall.upper(), SEVERITY_STYLE.get(overall, "")),
        Piece(f" ({len(doc['checks']) - not_ok} checks ok, {not_ok} not ok)"),
    )
    width = out.console.width if out.is_terminal else None
    show_lines(out, [verdict, *rig_body(doc, Screen(width), datetime.now(UTC), used=1)])


def _check(
    out: Output, host: HostSources, config: Path | None, probe: bool, skip: str | None = None
) -> int:
    settings = load_cli_settings(config)
    judging = host_judging(settings, config, simulated=host.simulated)
    report = run_local_check(
        host,
        settings.rig,
        xid_catalogue(settings),
        host_judging=judging,
        probe=probe,
        skip_probe=skip,
    )
    if out.json_mode:
        out.emit_json(report.document())
    else:
        render(out, report)
    return Severity(report.document()["overall"]).rank


def run(
    out: Output,
    simulate: str | None,
    config: Path | None,
    daemon_url: str | None = None,
    probe: bool = True,
) -> int:
    """Check the simulated or real rig; the exit code is the worst severity (3 on errors).

    On the real rig, a fleetd answering at ``daemon_url`` (this machine only) names its
    own and its engine's pids, which then do not count as foreign GPU holders; while its
    engine runs the CUDA probe is skipped (it never runs beside an engine).
    """
    try:
        if simulate is None:
            from daemon.cli.client import find_token
            from daemon.cli.rig.gpu_pids import running_daemon_pids
            from hwcheck.realhost import real_host_sources

            daemon_pids: set[int] = set()
            engine: set[int] = set()
            if daemon_url is not None:
                token = find_token(None, daemon_url)
                daemon_pids, engine = running_daemon_pids(daemon_url, token)
            skip = f"the engine runs (pids {', '.join(map(str, sorted(engine)))})"
            host = real_host_sources(exclude_pids=daemon_pids | engine)
            try:
                return _check(out, host, config, probe, skip if engine else None)
            finally:
                host.close()
        from hwcheck.sim.rig import SimulatedRig

        scenario = load_scenario(simulate)
        with tempfile.TemporaryDirectory(prefix="cmpfleet-check-") as state_dir:
            sim_host = SimulatedRig(scenario, Path(state_dir)).host_sources()
            try:
                return _check(out, sim_host, config, probe)
            finally:
                sim_host.close()
    except BackendUnavailable as exc:  # NVML down: the reason and what to do, one line
        out.fail_unknown(f"{exc}. Remedy: {exc.remedy}" if exc.remedy else str(exc))
    except (ConfigError, ScenarioError, BackendError, KernelLogUnavailable) as exc:
        out.fail_unknown(str(exc))
    except ClientError as exc:  # the local daemon's token could not be looked for
        out.fail_unknown(str(exc))
