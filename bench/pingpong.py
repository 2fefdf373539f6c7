#!/usr/bin/env python3
"""A plain blocking-socket ping-pong (socket, connect, sendall, recv: nothing else), to time
a preload library under an unmodified program that uses neither epoll nor sendto.

  pingpong.py serve ADDR PORT          echoes each message until the client closes (one client)
  pingpong.py ping ADDR PORT N SIZE    N round trips of SIZE bytes; prints
                                       "pingpong: N SIZE p50_us avg_us min_us max_us"
"""
import socket
import sys
import time


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(n - len(buf))
        if not b:
            return None
        buf += b
    return bytes(buf)


def serve(addr, port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    c, _ = ls.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    size = int.from_bytes(recv_exact(c, 4), "big")
    while True:
        m = recv_exact(c, size)
        if m is None:
            break
        c.sendall(m)
    c.close()
    ls.close()


def ping(addr, port, n, size):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    deadline = time.monotonic() + 30
    while True:
        try:
            s.connect((addr, port))
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            s.close()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(size.to_bytes(4, "big"))
    msg = b"x" * size
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        s.sendall(msg)
        if recv_exact(s, size) != msg:
            sys.exit("pingpong: the echo differs")
        times.append((time.perf_counter_ns() - t0) / 1000)
    s.close()
    times.sort()
    print(f"pingpong: {n} {size} {times[len(times) // 2]:.1f} {sum(times) / n:.1f} {times[0]:.1f} {times[-1]:.1f}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "ping":
        ping(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit(__doc__)
