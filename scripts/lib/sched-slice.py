#!/usr/bin/env python3
"""Run a command with a shorter EEVDF slice requested for its normal threads.

    scripts/lib/sched-slice.py SLICE_US CMD [ARGS...]

An experiment harness for the replay engine's tail (docs/PERFORMANCE.md, Replay engine), not
part of the product: it asks the kernel (Linux >= 6.12, EEVDF) for a slice of SLICE_US
microseconds (100 to 100000) for every SCHED_OTHER thread of CMD, through sched_setattr's
`sched_runtime`, keeping each thread's nice value. Threads of another policy (the engine's
SCHED_FIFO timing lanes) are left alone. A thread with a shorter slice gets an earlier
virtual deadline and may preempt the running one when it wakes, instead of waiting for its
slice to end (at HZ 250 that can be a tick, 4 ms). New threads are found by polling
/proc/PID/task every 2 ms, so a thread runs with the default slice for at most that long.
Prints to stderr how many threads it set; exits with CMD's status.
"""

import ctypes
import os
import signal
import subprocess
import sys
import time

SYS_SCHED_SETATTR = 314  # x86_64
SCHED_OTHER = 0


class SchedAttr(ctypes.Structure):
    # struct sched_attr, SCHED_ATTR_SIZE_VER0 (48 bytes)
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
    ]


libc = ctypes.CDLL(None, use_errno=True)


def set_slice(tid: int, slice_ns: int) -> bool:
    try:
        if os.sched_getscheduler(tid) != SCHED_OTHER:
            return False
        nice = os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        return False  # the thread has ended
    attr = SchedAttr(
        size=ctypes.sizeof(SchedAttr),
        sched_policy=SCHED_OTHER,
        sched_nice=nice,
        sched_runtime=slice_ns,
    )
    if libc.syscall(SYS_SCHED_SETATTR, tid, ctypes.byref(attr), 0) != 0:
        err = ctypes.get_errno()
        sys.exit(f"sched-slice: sched_setattr(tid {tid}, runtime {slice_ns} ns): {os.strerror(err)}")
    return True


def main() -> int:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    slice_ns = int(sys.argv[1]) * 1000
    child = subprocess.Popen(sys.argv[2:])
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    seen, set_count = set(), 0
    while child.poll() is None:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        except FileNotFoundError:
            break
        for tid in tids:
            if tid not in seen:
                seen.add(tid)
                set_count += set_slice(tid, slice_ns)
        time.sleep(0.002)
    status = child.wait()
    print(f"sched-slice: {set_count} of {len(seen)} threads set to a {slice_ns // 1000} µs slice",
          file=sys.stderr)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
