"""``fleetctl check``: a one-shot local hardware check with no daemon."""

from __future__ import annotations

import tempfile
from pathlib import Path

from daemon.cli.output import Output
from daemon.cli.render import render_rig
from daemon.config import ConfigError, load_cli_settings, xid_catalogue
from hwcheck.backend import BackendError
from hwcheck.host import HostSources
from hwcheck.kernellog.errors import KernelLogUnavailable
from hwcheck.model import Severity
from hwcheck.oneshot import CheckReport, run_local_check
from hwcheck.sim.scenario import ScenarioError, load_scenario


def render(out: Output, report: CheckReport) -> None:
    """The human form: the card table, every check that is not ok, and a summary."""
    doc = report.document()
    not_ok = render_rig(out, doc)
    passed = len(doc["checks"]) - not_ok
    out.line(f"overall: {doc['overall'].upper()} ({passed} checks ok, {not_ok} not ok)")


def _check(out: Output, host: HostSources, config: Path | None) -> int:
    settings = load_cli_settings(config)
    report = run_local_check(host, settings.rig, xid_catalogue(settings))
    if out.json_mode:
        out.emit_json(report.document())
    else:
        render(out, report)
    return Severity(report.document()["overall"]).rank


def run(out: Output, simulate: str | None, config: Path | None) -> int:
    """Check the simulated or real rig; the exit code is the worst severity (3 on errors)."""
    try:
        if simulate is None:
            from hwcheck.realhost import real_host_sources

            host = real_host_sources()
            try:
                return _check(out, host, config)
            finally:
                host.close()
        from hwcheck.sim.rig import SimulatedRig

        scenario = load_scenario(simulate)
        with tempfile.TemporaryDirectory(prefix="cmpfleet-check-") as state_dir:
            sim_host = SimulatedRig(scenario, Path(state_dir)).host_sources()
            try:
                return _check(out, sim_host, config)
            finally:
                sim_host.close()
    except (ConfigError, ScenarioError, BackendError, KernelLogUnavailable) as exc:
        out.fail_unknown(str(exc))
