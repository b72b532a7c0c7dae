#!/usr/bin/env python3
"""F1 attack: pipeline many requests on a connection and close it without reading.

The server's next write meets a closed socket (EPIPE/ECONNRESET); before the fix a
`handled serve` process died of SIGPIPE. Bounded: ROUNDS connections, loopback only.

    tests/hostile/early_close.py 127.0.0.1:8000 /healthz
    tests/hostile/early_close.py 127.0.0.1:8001 /live      # domain registry port
"""
import socket
import sys
import time

ROUNDS = 50
PIPELINED = 200


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    path = sys.argv[2] if len(sys.argv) > 2 else "/healthz"
    if not host.startswith("127.") and host != "localhost":
        sys.exit("loopback targets only")
    burst = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * PIPELINED
    for _ in range(ROUNDS):
        s = socket.create_connection((host, int(port)), timeout=2)
        try:
            s.sendall(burst)
        except OSError:
            pass
        s.close()
    time.sleep(0.3)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    status = s.recv(64).split(b"\r\n")[0].decode(errors="replace")
    print(f"after {ROUNDS} early-closed connections the server answers: {status}")
    sys.exit(0 if " 200" in status else 1)


if __name__ == "__main__":
    main()
