"""Streamed requests one after another on one keep-alive connection, timing
the first and the last byte of each answer's body, for bench/load.sh.

    python3 bench/ttfb.py HOST:PORT DIALECT BODY N TARGET

Sends BODY (a streamed request) N times, after 20 unmeasured warm-up
requests, with the dialect's headers and `x-bench-stream: 1`; prints one
line a request: `stream DIALECT TARGET FIRST_MS LAST_MS`, the times from
sending the request to the first byte of the body (the first event) and
to its last byte. Fails unless every answer is a 200 and the expected
streamed answer (bench/dialects.py check).
"""
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dialects  # noqa: E402

addr, dialect, body_file, n, target = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
host, port = addr.rsplit(":", 1)
body = open(body_file, "rb").read()
head = [f"POST /{dialects.STREAM_PATHS[dialect]} HTTP/1.1", f"Host: {addr}", "x-bench-stream: 1", f"Content-Length: {len(body)}"]
head += [f"{k}: {v}" for k, v in dialects.HEADERS[dialect].items()]
request = ("\r\n".join(head) + "\r\n\r\n").encode() + body

sock = socket.create_connection((host, int(port)))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
clock = time.perf_counter
pending = b""


def dechunk(raw):
    """The body of a complete chunked encoding, or None while incomplete."""
    out, i = bytearray(), 0
    while True:
        j = raw.find(b"\r\n", i)
        if j < 0:
            return None
        size = int(raw[i:j].split(b";")[0], 16)
        if size == 0:
            return bytes(out) if raw.find(b"\r\n\r\n", j) == j else None
        if len(raw) < j + 2 + size + 2:
            return None
        out += raw[j + 2 : j + 2 + size]
        i = j + 2 + size + 2


def one():
    """Sends the request; returns (status, body, first, last) in seconds."""
    global pending
    t0 = clock()
    sock.sendall(request)
    buf, first = pending, None
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise SystemExit(f"{target} {dialect}: connection closed")
        buf += data
    hdr, rest = buf.split(b"\r\n\r\n", 1)
    lines = hdr.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    if rest:
        first = clock()
    if "content-length" in fields:
        size = int(fields["content-length"])
        while len(rest) < size:
            data = sock.recv(65536)
            if not data:
                raise SystemExit(f"{target} {dialect}: connection closed")
            first = first or clock()
            rest += data
        last = clock()
        pending, out = rest[size:], rest[:size]
    elif fields.get("transfer-encoding", "").lower() == "chunked":
        while True:
            if rest.endswith(b"0\r\n\r\n"):
                out = dechunk(rest)
                if out is not None:
                    break
            data = sock.recv(65536)
            if not data:
                raise SystemExit(f"{target} {dialect}: connection closed")
            first = first or clock()
            rest += data
        last, pending = clock(), b""
    else:
        raise SystemExit(f"{target} {dialect}: neither a length nor chunks: {hdr!r}")
    return status, out, first - t0, last - t0


for i in range(20 + n):
    status, out, first, last = one()
    err = None if status == 200 else f"status {status}"
    if err is None and (i == 0 or i == 19 + n):
        err = dialects.check(dialect, "sse", out.decode("utf-8"))
    if err:
        raise SystemExit(f"{target} {dialect} streamed: {err}: {out[:300]!r}")
    if i >= 20:
        print(f"stream {dialect} {target} {first * 1e3:.4f} {last * 1e3:.4f}")
