"""``fleetctl`` entry point."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the CLI; Ctrl-C exits 130 with one line instead of a traceback."""
    from daemon.cli.app import app

    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("fleetctl: interrupted\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
