"""Unit tests of the repository's Python scripts (`python3 -m unittest discover -s tests/scripts`,
the `scripts` step of scripts/test-all.sh)."""
import importlib.util
import json
import os
import socket
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ClusterBalancers(unittest.TestCase):
    """scripts/cluster.py says "up" only for a balancer that runs and listens."""

    cluster = load("cluster_script", "scripts/cluster.py")

    def test_listening_reads_the_kernels_sockets(self):
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        with udp, tcp:
            self.assertTrue(self.cluster.listening("udp", "127.0.0.1", udp.getsockname()[1]))
            self.assertTrue(self.cluster.listening("tcp", "127.0.0.1", tcp.getsockname()[1]))
            self.assertFalse(self.cluster.listening("tcp", "127.0.0.1", udp.getsockname()[1]))

    def test_a_dead_balancer_is_not_up(self):
        pid = os.fork()
        if pid == 0:
            os._exit(1)
        os.waitpid(pid, 0)
        why = self.cluster.wait_serving(pid, "udp", "127.0.0.1", 9, timeout=1)
        self.assertIn("exited at start", why)

    def test_nginx_without_its_stream_module_names_the_package(self):
        log = 'nginx: [emerg] dlopen() "/usr/lib/nginx/modules/ngx_stream_module.so" failed (No such file)'
        self.assertIn("apt-get install libnginx-mod-stream", self.cluster.diagnosis("nginx", log))


class LinkCheck(unittest.TestCase):
    """scripts/check-links.py finds dead links and cited paths."""

    links = load("check_links", "scripts/check-links.py")

    def test_dead_references_are_named_with_their_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", dir=os.path.join(ROOT, "docs"), delete=False) as f:
            f.write("# Title\n\nSee [the proxy](web-proxy.md) and docs/nothing-here.md,\n"
                    "[ok](configuration.md), [anchor](#title), [bad anchor](#nope), `crates/proto/tests/vectors_*.rs`.\n")
        try:
            source = os.path.relpath(f.name, ROOT)
            problems = self.links.check_file(source)
        finally:
            os.unlink(f.name)
        self.assertEqual(len(problems), 3, problems)
        self.assertIn(f"{source}:3: link web-proxy.md", problems[0])
        self.assertIn("docs/nothing-here.md: no such file", problems[1])
        self.assertIn(f"{source}:4: link #nope: no heading", problems[2])



class PartitionMonotonic(unittest.TestCase):
    """tests/partition/monotonic.py: a copy may lag and skip, never go back."""

    monotonic = load("monotonic", "tests/partition/monotonic.py")

    def reads(self, *values):
        return [json.dumps(dict(node="m", handle="TEST/h", value=v)) for v in values]

    def test_lagging_skipping_and_absence_coming_back_are_fine(self):
        found, _ = self.monotonic.reversals(self.reads("a", "a", "c", None, "d", None))
        self.assertEqual(found, [])

    def test_a_value_served_again_after_a_later_one_is_a_reversal(self):
        found, _ = self.monotonic.reversals(self.reads("a", "b", "a"))
        self.assertEqual(found, [(("m", "TEST/h"), "a")])

if __name__ == "__main__":
    unittest.main()
