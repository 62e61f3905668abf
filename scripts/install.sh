#!/usr/bin/env bash
# Install cmpfleet as a system service:
#   /opt/cmpfleet/venv            a virtualenv with cmpfleet (its own: `daemon` and `web`
#                                 are generic package names)
#   /etc/cmpfleet/fleet.toml      the example config (an existing config is never overwritten)
#   /etc/systemd/system/fleetd.service
# Usage: sudo scripts/install.sh [--root DIR] [--skip-venv]
#   --root DIR    install under DIR instead of / (packaging, tests)
#   --skip-venv   do not create/refresh the virtualenv
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root=""
skip_venv=0
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="${2:?--root needs a directory}"; shift 2 ;;
    --skip-venv) skip_venv=1; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
  echo "install.sh: run as root (or pass --root DIR)" >&2; exit 2
fi
opt="$root/opt/cmpfleet"; etc="$root/etc/cmpfleet"; unit_dir="$root/etc/systemd/system"
install -d -m 0755 "$opt" "$unit_dir"
install -d -m 0750 "$etc"
if [ "$skip_venv" = 0 ]; then
  python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
    echo "install.sh: cmpfleet needs Python >= 3.11" >&2; exit 2; }
  echo "install.sh: building $opt/venv ..."
  python3 -m venv "$opt/venv"
  "$opt/venv/bin/python" -m pip install --quiet --upgrade pip
  "$opt/venv/bin/python" -m pip install --quiet "$src"
fi
install -m 0644 "$src/README.md" "$opt/README.md"
if [ -e "$etc/fleet.toml" ]; then
  echo "install.sh: keeping existing $etc/fleet.toml"
else
  install -m 0640 "$src/daemon/examples/fleet.toml" "$etc/fleet.toml"
  echo "install.sh: wrote $etc/fleet.toml (run 'fleetctl init --force' on the rig to record its baseline)"
fi
install -m 0644 "$src/systemd/fleetd.service" "$unit_dir/fleetd.service"
if [ -z "$root" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  echo "install.sh: now run: systemctl enable --now fleetd"
else
  echo "install.sh: installed under ${root:-/} (systemd not running: enable fleetd yourself)"
fi
