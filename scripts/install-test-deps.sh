#!/usr/bin/env bash
# The system packages the test suite drives (Debian/Ubuntu): Chromium for the review page and the
# OAuth consent steps, tmux and script for the terminal tests, gnome-keyring and dbus for the real
# Secret Service, and PostgreSQL's server for the team-server tests (run as the postgres user in a
# temp dir, on a loopback port). Used by .ci/run and named in the README; installs only what is missing.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v gnome-keyring-daemon >/dev/null 2>&1 || need+=(gnome-keyring)
command -v dbus-run-session >/dev/null 2>&1 || need+=(dbus)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v script >/dev/null 2>&1 || need+=(bsdutils)
# Debian's server lives under /usr/lib/postgresql/<major>/bin, off the PATH
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ "${#need[@]}" -eq 0 ]; then
  echo "install-test-deps: everything is there"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >/dev/null
echo "install-test-deps: installed ${need[*]}"
