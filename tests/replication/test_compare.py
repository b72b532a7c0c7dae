#!/usr/bin/env python3
"""compare.py finds each kind of difference (and none between equal snapshots).

    python3 tests/replication/test_compare.py
"""
import copy
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

VALUE = {"index": 1, "type": "URL", "data_hex": "6869", "ttl_type": 0, "ttl": 86400,
         "timestamp": 1795613217, "perms": "1110", "refs": []}
SNAP = [
    {"handle": "TEST/A", "values": [VALUE, dict(VALUE, index=2, type="EMAIL")]},
    {"handle": "TEST/B", "values": [dict(VALUE)]},
    {"prefix": "0.NA/TEST2", "list_error": "SERVER NOT RESPONSIBLE FOR HANDLE"},
    {"homed": "0.NA/TEST"},
]


def run(a, b, **kw):
    files = []
    for snap in (a, b):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        f.write("".join(json.dumps(o) + "\n" for o in snap))
        f.close()
        files.append(f.name)
    try:
        return compare.compare(compare.load(files[0], False), compare.load(files[1], False), ["a", "b"],
                               kw.get("ignore_timestamps", False))
    finally:
        for f in files:
            os.unlink(f)


class CompareTest(unittest.TestCase):
    def test_equal_snapshots_have_no_difference(self):
        self.assertEqual(run(SNAP, copy.deepcopy(SNAP)), [])

    def test_handle_names_compare_case_insensitively(self):
        b = copy.deepcopy(SNAP)
        b[0]["handle"] = "test/a"
        self.assertEqual(run(SNAP, b), [])

    def test_each_value_field_is_compared(self):
        for field, other in [("type", "URN"), ("data_hex", "6868"), ("ttl_type", 1), ("ttl", 60),
                             ("timestamp", 1), ("perms", "1100"), ("refs", ["1:X/Y"])]:
            b = copy.deepcopy(SNAP)
            b[1]["values"][0][field] = other
            diffs = run(SNAP, b)
            self.assertEqual(len(diffs), 1, field)
            self.assertIn(f"TEST/B index 1 {field}", diffs[0])

    def test_timestamps_can_be_ignored(self):
        b = copy.deepcopy(SNAP)
        b[1]["values"][0]["timestamp"] = 1
        self.assertEqual(run(SNAP, b, ignore_timestamps=True), [])

    def test_missing_handle_value_and_prefix(self):
        b = copy.deepcopy(SNAP)
        del b[1]                      # TEST/B gone
        b[0]["values"].pop()          # TEST/A index 2 gone
        b[-1]["homed"] = "0.NA/OTHER"
        diffs = run(SNAP, b)
        self.assertIn("TEST/B: only on a", diffs)
        self.assertIn("TEST/A index 2: only on a (EMAIL)", diffs)
        self.assertIn("homed prefix 0.NA/TEST: only on a", diffs)
        self.assertIn("homed prefix 0.NA/OTHER: only on b", diffs)

    def test_a_listing_error_on_one_side_only(self):
        b = [o for o in SNAP if "list_error" not in o]
        self.assertEqual(len(run(SNAP, b)), 1)


if __name__ == "__main__":
    unittest.main()
