#!/usr/bin/env python3
"""F11 damage: flip one byte in a STOPPED server's data directory.

The embedded store is `DATA_DIR/handles.redb` and its write-ahead log
`DATA_DIR/handles.redb.wal`. Pick the file and the place:

    tests/hostile/corrupt_store.py DATA_DIR log middle           # byte in the middle of the log
    tests/hostile/corrupt_store.py DATA_DIR log 1234             # byte at offset 1234
    tests/hostile/corrupt_store.py DATA_DIR store match:https://example.org/x
                                   # a byte inside every copy of that text in the store file
    tests/hostile/corrupt_store.py DATA_DIR store middle

Then start the server on DATA_DIR: it must refuse to start (naming the file and the
offset, saying how to recover) or, for a value in a cleanly closed store, answer that
handle with an error, never the damaged value. Flipping the same spot again undoes the
damage (XOR 0x01). Exits 0 after flipping, 2 on bad arguments or nothing to flip.
"""
import os
import sys

FILES = {"store": "handles.redb", "log": "handles.redb.wal"}


def offsets(data, where):
    if where == "middle":
        return [len(data) // 2] if data else []
    if where.startswith("match:"):
        needle = where[len("match:"):].encode()
        found, at = [], data.find(needle)
        while at >= 0:
            found.append(at + len(needle) // 2)
            at = data.find(needle, at + 1)
        return found
    at = int(where)
    return [at] if 0 <= at < len(data) else []


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in FILES:
        sys.stderr.write(__doc__)
        sys.exit(2)
    path = os.path.join(sys.argv[1], FILES[sys.argv[2]])
    with open(path, "r+b") as f:
        data = f.read()
        spots = offsets(data, sys.argv[3])
        if not spots:
            sys.stderr.write(f"{path}: nothing to flip at {sys.argv[3]!r} ({len(data)} bytes)\n")
            sys.exit(2)
        for at in spots:
            f.seek(at)
            f.write(bytes([data[at] ^ 0x01]))
        f.flush()
        os.fsync(f.fileno())
    print(f"flipped 1 byte at offset(s) {', '.join(map(str, spots))} of {path}")


if __name__ == "__main__":
    main()
