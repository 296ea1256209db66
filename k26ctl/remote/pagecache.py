"""Page-cache residency and a rate-bounded read-ahead of files, run ON THE HOST by its own Python.

k26ctl sends this file's text as `python3 -c TEXT MODE ...` (standard library only, nothing to
install). Modes, one JSON document per line on stdout:

    residency FILE...                  -> {"files": [{"path", "bytes", "resident"}], "bytes", "resident"}
    readahead RATE_BYTES MAX_S FILE... -> {"progress": bytes_read, "seconds"} about once a second, then
                                          {"done": true|false, "bytes_read", "seconds", "stopped"}

Residency comes from mincore(2) over a read-only mapping, 1 GiB at a time (the page vector of a
500 GB checkpoint would not fit in memory at once). The read-ahead reads each file in 8 MiB chunks
through the page cache, sleeping to stay under RATE_BYTES per second, and stops at MAX_S seconds, at
SIGTERM/SIGINT, or when its reader goes away (a write to a closed pipe).
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import signal
import sys
import time

WINDOW = 1 << 30
CHUNK = 8 << 20
PAGE = mmap.PAGESIZE


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def resident_bytes(path: str, libc: ctypes.CDLL) -> tuple[int, int]:
    """(size, bytes in the page cache) of one file."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    resident = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset in range(0, size, WINDOW):
            length = min(WINDOW, size - offset)
            addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap {path}")
            try:
                pages = (length + PAGE - 1) // PAGE
                vec = (ctypes.c_ubyte * pages)()
                if libc.mincore(addr, length, vec) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore {path}")
                resident += sum(1 for b in bytes(vec) if b & 1) * PAGE
            finally:
                libc.munmap(addr, length)
    finally:
        os.close(fd)
    return size, min(resident, size)


def residency(paths: list[str]) -> dict[str, object]:
    libc = _libc()
    files = []
    total = cached = 0
    for path in paths:
        size, resident = resident_bytes(path, libc)
        files.append({"path": path, "bytes": size, "resident": resident})
        total, cached = total + size, cached + resident
    return {"files": files, "bytes": total, "resident": cached}


def readahead(rate: float, max_seconds: float, paths: list[str]) -> dict[str, object]:
    stopped = {"why": ""}

    def stop(signum: int, _frame: object) -> None:
        stopped["why"] = signal.Signals(signum).name

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    start = time.monotonic()
    done = 0
    last_report = start
    buf = bytearray(CHUNK)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while not stopped["why"]:
                now = time.monotonic()
                if now - start >= max_seconds:
                    stopped["why"] = "time limit"
                    break
                wait = done / rate - (now - start)  # the budget allows the next chunk after this
                if wait > 0:
                    time.sleep(min(wait, 1.0, start + max_seconds - now))
                else:
                    got = os.readv(fd, [buf])
                    if got <= 0:
                        break
                    done += got
                if now - last_report >= 1.0:
                    last_report = now
                    print(json.dumps({"progress": done, "seconds": round(now - start, 3)}), flush=True)
        finally:
            os.close(fd)
        if stopped["why"]:
            break
    seconds = time.monotonic() - start
    return {
        "done": not stopped["why"],
        "bytes_read": done,
        "seconds": round(seconds, 3),
        "stopped": stopped["why"],
    }


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else ""
    try:
        if mode == "residency":
            print(json.dumps(residency(argv[1:])), flush=True)
        elif mode == "readahead":
            print(json.dumps(readahead(float(argv[1]), float(argv[2]), argv[3:])), flush=True)
        else:
            print(json.dumps({"error": f"unknown mode {mode!r}"}), flush=True)
            return 2
    except BrokenPipeError:
        return 0  # the reader went away: that is the interrupt
    except OSError as exc:
        print(json.dumps({"error": f"{exc.filename or ''}: {exc.strerror or exc}"}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
