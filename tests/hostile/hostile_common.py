"""What the attack tools here share (Python 3 stdlib only)."""
import sys


def loopback_target(text):
    """HOST:PORT, refusing anything but a loopback host."""
    host, port = text.rsplit(":", 1)
    if not host.startswith("127.") and host != "localhost":
        sys.exit("loopback targets only")
    return host, int(port)


def rss_kb(pid):
    """Resident set size of process `pid` in kB (None without a pid or /proc)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None
