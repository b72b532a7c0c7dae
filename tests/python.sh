# The Python of the test suites: a virtual environment holding
# tests/requirements.txt, at $HANDLED_TEST_VENV (default test-venv in
# $CARGO_TARGET_DIR, else in the repository's target/), made by
# scripts/install-test-deps.sh; never the system's site-packages (no pip
# --break-system-packages). Sourced by the suites:
#
#   . tests/python.sh
#   "$TEST_PYTHON" -m pytest ...
_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TEST_VENV=${HANDLED_TEST_VENV:-$(cd "$_repo" && realpath -m "${CARGO_TARGET_DIR:-target}")/test-venv}
TEST_PYTHON=$TEST_VENV/bin/python
if [ ! -x "$TEST_PYTHON" ]; then
  echo "no test virtual environment at $TEST_VENV: run scripts/install-test-deps.sh" >&2
  exit 1
fi
unset _repo
