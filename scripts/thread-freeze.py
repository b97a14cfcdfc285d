#!/usr/bin/env python3
"""A stand-in for a vCPU the hypervisor stops while a thread of ours of normal priority runs
on it: every PERIOD_MS stops one thread of process PID other than the timing lanes, picked at
random, for MS (a ptrace stop, so any user-space lock it holds stays held, as on a stopped
vCPU, which the guest's scheduler cannot move it off). Logs each stop to LOG: wall-clock
start and end, thread id, name. Ends with the process (needs root or ptrace rights).

Usage: scripts/thread-freeze.py PID PERIOD_MS MS LOG [SEED]"""
import ctypes, os, random, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
SEIZE, INTERRUPT, DETACH = 0x4206, 0x4207, 17
WALL = 0x40000000
pid, period, freeze, log = int(sys.argv[1]), float(sys.argv[2]) / 1e3, float(sys.argv[3]) / 1e3, open(sys.argv[4], "w")
rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else None)
while os.path.exists(f"/proc/{pid}"):
    time.sleep(period)
    try:
        tids = [t for t in os.listdir(f"/proc/{pid}/task")
                if not open(f"/proc/{pid}/task/{t}/comm").read().startswith("cnsreplay-timin")]
    except OSError:
        break
    if not tids:
        continue
    tid = int(rng.choice(tids))
    try:
        name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
    except OSError:
        continue
    if libc.ptrace(SEIZE, tid, None, None) != 0:
        continue
    libc.ptrace(INTERRUPT, tid, None, None)
    st = ctypes.c_int()
    libc.waitpid(tid, ctypes.byref(st), WALL)
    t0 = time.time()
    time.sleep(freeze)
    t1 = time.time()
    libc.ptrace(DETACH, tid, None, None)
    log.write(f"{t0:.6f} {t1:.6f} {tid} {name}\n"); log.flush()
