#!/usr/bin/env python3
"""Per-connection phases from `perf script -F comm,pid,tid,cpu,time,event,trace` of
sock:inet_sock_set_state and the server's accept/read/write/close syscalls.
A server fd is tied to its client port by the state change its close() makes
(same thread, next event); a port's record starts anew at each handshake, as ports
are reused within a trace when no TIME_WAIT holds them. Prints median / p90 in µs."""
import re, sys, statistics
pid = sys.argv[1]; port = sys.argv[2] if len(sys.argv) > 2 else "2641"
line_re = re.compile(r'^\s*(\S.*?)\s+(\d+)/(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)$')
ports = {}      # client port -> times
fds = {}        # fd -> times (server)
pending = {}    # tid -> (syscall, fd, t)
closing = {}    # tid -> conn dict awaiting its port
syn_by_tid = {}
conns = []
for l in sys.stdin:
    m = line_re.match(l)
    if not m: continue
    comm, tgid, tid, t, ev, rest = m.groups(); t = float(t) * 1e6
    if ev == 'sock:inet_sock_set_state':
        sp = re.search(r'sport=(\d+) dport=(\d+)', rest); st = re.search(r'oldstate=(\S+) newstate=(\S+)', rest)
        if not sp or not st: continue
        sport, dport = sp.groups(); old, new = st.groups()
        if sport == port:
            d = ports.setdefault(dport, {})
            if new == 'TCP_ESTABLISHED': d['est'] = t
            elif new == 'TCP_CLOSE_WAIT': d['fin_in'] = t
            elif new == 'TCP_FIN_WAIT1' and old == 'TCP_ESTABLISHED': d['srv_fin'] = t
            if tid in closing and new in ('TCP_FIN_WAIT1', 'TCP_LAST_ACK', 'TCP_CLOSE'):
                c = closing.pop(tid); c['rec'] = d
        elif dport == port:
            if new == 'TCP_SYN_SENT': syn_by_tid[tid] = t
            else:
                if new == 'TCP_ESTABLISHED' and tid in syn_by_tid:
                    ports[sport] = {'connect': syn_by_tid.pop(tid), 'cli_est': t}  # a new connection
                elif new == 'TCP_FIN_WAIT1': ports.setdefault(sport, {})['cli_close'] = t
        continue
    if tgid != pid: continue
    name = ev.split(':')[1]
    if name.startswith('sys_enter_'):
        fdm = re.search(r'fd: (0x[0-9a-f]+)', rest)
        pending[tid] = (name[10:], int(fdm.group(1), 16) if fdm else None, t)
        if name == 'sys_enter_close' and fdm and int(fdm.group(1), 16) in fds:
            c = fds.pop(int(fdm.group(1), 16)); c['close'] = t; closing[tid] = c; conns.append(c)
    elif name.startswith('sys_exit_'):
        sc = name[9:]; rm = re.search(r'0x([0-9a-f]+)$', rest.strip())
        ret = int(rm.group(1), 16) if rm else None
        if ret is not None and ret >= 1 << 63: ret -= 1 << 64
        if sc.startswith('accept'):
            if ret is not None and ret >= 0: fds[ret] = {'accept': t}
            continue
        p = pending.pop(tid, None)
        if not p or p[0] != sc or p[1] not in fds: continue
        d = fds[p[1]]
        if sc in ('read', 'recvfrom'):
            if ret and ret > 0: d.setdefault('read', t)
            elif ret == 0: d.setdefault('eof', t)
            else: d['eagain'] = d.get('eagain', 0) + 1
        elif sc in ('write', 'sendto') and ret and ret > 0:
            d.setdefault('write', t)
def q(v):
    if not v: return '-'
    v = sorted(v); return f"{statistics.median(v):.0f} / {v[int(len(v) * 0.9)]:.0f}"
full = []
for c in conns:
    if 'rec' in c and 'connect' in c['rec']:
        c.update(c['rec']); full.append(c)
def ph(a, b): return q([c[b] - c[a] for c in full if a in c and b in c])
print(f"connections traced end to end: {len(full)}; EAGAIN reads per connection {sum(c.get('eagain', 0) for c in full) / max(1, len(full)):.2f}; "
      f"server closed first in {sum(1 for c in full if 'srv_fin' in c)}, client first in {sum(1 for c in full if 'fin_in' in c)}")
print("| phase | median / p90 µs |\n|---|---|")
print(f"| client connect() → handshake done (server ESTABLISHED) | {ph('connect', 'est')} |")
print(f"| ESTABLISHED → accept returns (accept queue) | {ph('est', 'accept')} |")
print(f"| accept → request read | {ph('accept', 'read')} |")
print(f"| request read → reply written | {ph('read', 'write')} |")
print(f"| reply written → server closes (server closes first) | {ph('write', 'srv_fin')} |")
print(f"| reply written → client FIN arrives (client closes first) | {ph('write', 'fin_in')} |")
print(f"| client FIN arrives → server reads EOF | {ph('fin_in', 'eof')} |")
print(f"| server reads EOF → close() | {ph('eof', 'close')} |")
print(f"| connect() → close() by the server (whole connection) | {ph('connect', 'close')} |")
