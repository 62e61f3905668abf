"""fleetctl's global options (``--url``, ``--token-file``, ``--rig``, ``--json`` ...).

Apart from the command tree so that the fast path of ``fleetctl status``
(``daemon.cli.fastpath``) and the typer commands build their output and client the
same way; importing it costs nothing (the client and rich are imported when used).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon.cli.client import FleetClient
    from daemon.cli.output import Output

DEFAULT_URL = "http://127.0.0.1:8170"


@dataclass
class GlobalOptions:
    """Options given before the command."""

    url: str
    token_file: Path | None
    rig: str | None
    json_mode: bool
    fleet_file: Path | None = None
    no_color: bool = False

    def output(self, json_here: bool) -> Output:
        """The output for a command, JSON when asked before or after the command."""
        from daemon.cli.output import Output

        return Output.create(self.json_mode or json_here, no_color=self.no_color)

    def client(self, out: Output, unreachable_code: int = 1) -> FleetClient:
        """A client for the daemon (``--rig`` picks one of the fleet file)."""
        from daemon.cli.client import ClientError, FleetClient, locate_token
        from daemon.cli.output import EXIT_BAD_INPUT, EXIT_UNKNOWN
        from daemon.cli.transport import url_problem

        url, token_file, origin = self.url, self.token_file, "--token-file"
        try:
            if self.rig is not None:
                from daemon.cli.fleet.file import FleetFileError, resolve_rig

                try:
                    picked = resolve_rig(self.rig, self.fleet_file)
                except FleetFileError as exc:
                    out.fail(str(exc), unreachable_code)
                url = picked.url
                if token_file is None and picked.token_file is not None:
                    token_file, origin = picked.token_file, f"rigs.{self.rig}.token_file"
            elif (problem := url_problem(url)) is not None:
                # 2 is CRITICAL for the monitoring commands: a usage error there is UNKNOWN.
                code = EXIT_UNKNOWN if unreachable_code == EXIT_UNKNOWN else EXIT_BAD_INPUT
                out.fail(f"--url (or $FLEETCTL_URL): {problem}", code)
            return FleetClient.with_token(url, locate_token(token_file, url, file_origin=origin))
        except ClientError as exc:
            out.fail(str(exc), unreachable_code)


def only_cards(out: Output, text: str | None, code: int) -> frozenset[int] | None:
    """``--only 0,2`` (or ``1-3``) as card indexes; one line and exit ``code`` when malformed."""
    if text is None:
        return None
    from daemon.cli.views.rigview import parse_cards

    try:
        return parse_cards(text)
    except ValueError as exc:
        out.fail(f"--only: {exc}", code)
