#!/usr/bin/env bash
# What the test command needs on a fresh Debian machine, installed if missing
# (apt, pip; run as root, or with the tools already there). Idempotent: present
# tools are skipped. scripts/test-all.sh calls it first.
set -euo pipefail

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "install-test-deps: missing $*; run as root or install them: apt-get install $*" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

need_apt=()
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)   # aws-lc-rs builds AWS-LC with it
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)   # scripts/test-systemd-unit.sh
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)   # bench HTML reports are opened headless
# The cluster suites (tests/cluster): haproxy for TCP/HTTP, nginx's stream module for UDP.
command -v haproxy >/dev/null 2>&1 || need_apt+=(haproxy)
command -v nginx >/dev/null 2>&1 || need_apt+=(nginx-light)
[ -f /usr/lib/nginx/modules/ngx_stream_module.so ] || need_apt+=(libnginx-mod-stream)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt_install "${need_apt[@]}"
fi
# Domain registry black-box suite (tests/registry): Python 3 with pytest and requests.
if ! python3 -c 'import pytest, requests' >/dev/null 2>&1; then
  command -v pip3 >/dev/null 2>&1 || apt_install python3-pip
  python3 -m pip install -q pytest requests || python3 -m pip install -q --break-system-packages pytest requests
fi
# Admin console suite (tests/console): Playwright for Python driving Debian's Chromium
# (no browser download: the suite passes /usr/bin/chromium as executable_path).
if ! python3 -c 'import playwright.sync_api' >/dev/null 2>&1; then
  command -v pip3 >/dev/null 2>&1 || apt_install python3-pip
  python3 -m pip install -q playwright==1.65.2 || python3 -m pip install -q --break-system-packages playwright==1.65.2
fi
# JSON API suite (tests/rest/run.sh): a Python venv of its own.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt_install python3-venv
fi
if command -v rustup >/dev/null 2>&1; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust with rustup" >&2
  exit 1
fi

