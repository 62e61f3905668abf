#!/usr/bin/env bash
# Install cmpfleet from this checkout as a system service: a virtualenv of its own (the
# names `daemon` and `web` are generic), then `fleetd install`, which writes the unit
# (ExecStart = that venv's fleetd), /etc/cmpfleet/fleet.toml (kept if present) and the
# state dir. Without a checkout: `pipx install cmpfleet` (or a venv), then
# `sudo fleetd install` (README, "Installing on a rig").
# Usage: sudo scripts/install.sh [--root DIR] [--venv DIR] [--skip-venv] [--dry-run]
#   --root DIR    lay the files out under DIR instead of / (packaging, tests)
#   --venv DIR    the virtualenv (default /opt/cmpfleet/venv)
#   --skip-venv   use the virtualenv as it is (it must already hold cmpfleet)
#   --dry-run     say what would be done, change nothing
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="/"
venv="/opt/cmpfleet/venv"
skip_venv=0
dry_run=()
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="${2:?--root needs a directory}"; shift 2 ;;
    --venv) venv="${2:?--venv needs a directory}"; shift 2 ;;
    --skip-venv) skip_venv=1; shift ;;
    --dry-run) dry_run=(--dry-run); shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$skip_venv" = 0 ]; then
  if [ ${#dry_run[@]} -gt 0 ]; then
    echo "install.sh: would build $venv with cmpfleet from $src"
    [ -x "$venv/bin/fleetd" ] || exit 0
  else
    python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
      echo "install.sh: cmpfleet needs Python >= 3.11" >&2; exit 2; }
    echo "install.sh: building $venv ..."
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "$src"
  fi
fi
[ -x "$venv/bin/fleetd" ] || { echo "install.sh: no fleetd in $venv (drop --skip-venv)" >&2; exit 2; }
exec "$venv/bin/fleetd" install --root "$root" ${dry_run[@]+"${dry_run[@]}"}
