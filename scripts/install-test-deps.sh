#!/usr/bin/env bash
# What the test command needs on a fresh Debian machine, installed if missing
# (apt as root, or with the tools already there; Python packages into a virtual
# environment). Idempotent: present
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
# The partition suites (tests/partition) cut links with nftables rules inside namespaces.
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
# store = "sql" tests start a PostgreSQL and a MariaDB of their own (crates/testenv: handled_testenv::db).
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_apt+=(postgresql)
[ -x /usr/sbin/mariadbd ] && command -v mariadb-install-db >/dev/null 2>&1 || need_apt+=(mariadb-server)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt_install "${need_apt[@]}"
fi
# The Python suites (tests/registry, tests/console, tests/cluster) run in a virtual
# environment (tests/python.sh), never in the system's site-packages; it goes to
# $CARGO_TARGET_DIR/test-venv (target/test-venv without it), or $HANDLED_TEST_VENV. Playwright
# drives Debian's Chromium (no browser download: the console suite passes
# /usr/bin/chromium as executable_path). The JSON API suite makes a venv of its own.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt_install python3-venv
fi
# Beside the build: in $CARGO_TARGET_DIR when set (tests/python.sh looks there too).
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${HANDLED_TEST_VENV:-$(cd "$repo" && realpath -m "${CARGO_TARGET_DIR:-target}")/test-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$(dirname "$0")/../tests/requirements.txt"
if command -v rustup >/dev/null 2>&1; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo is missing: install Rust with rustup" >&2
  exit 1
fi
# The .deb package (scripts/test-deb.sh), from crates.io, into cargo's own bin folder.
if ! command -v cargo-deb >/dev/null 2>&1; then
  echo "install-test-deps: installing cargo-deb 3.8.0 into ${CARGO_HOME:-$HOME/.cargo}/bin (cargo install; for the deb step)" >&2
  cargo install --locked cargo-deb --version 3.8.0
fi
# The SBOM of a release (scripts/release.sh, run by scripts/test-deb.sh), from crates.io,
# pinned like cargo-deb: the CycloneDX project's own tool for Cargo.
if ! command -v cargo-cyclonedx >/dev/null 2>&1; then
  echo "install-test-deps: installing cargo-cyclonedx 0.5.9 into ${CARGO_HOME:-$HOME/.cargo}/bin (cargo install; for the release artifacts of the deb step)" >&2
  cargo install --locked cargo-cyclonedx --version 0.5.9
fi

