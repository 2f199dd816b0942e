#!/usr/bin/env python3
"""Times commands in turn, one run of each per round, so a change of the machine's load falls
on all of them alike (hyperfine runs each command's runs in one block).

usage: benches/interleave.py RUNS NAME CMD_OLD_40 CMD_OLD_1000 CMD_OLD_10000 CMD_NEW_40 ...
A CMD of the form `PREPARE ;; CMD` runs PREPARE first, untimed. Prints one table row per binary (old, new): the median wall time and the median CPU time (user
plus system, from wait4) at each size, with the ratio to the same binary's figure at 40.
LABELS="a,b" names the two rows (default "old,new").
"""
import os, shlex, statistics, subprocess, sys, time

runs, name = int(sys.argv[1]), sys.argv[2]
cmds = [[shlex.split(part) for part in c.split(" ;; ")] for c in sys.argv[3:]]
times = [[] for _ in cmds]
for _ in range(runs):
    for i, parts in enumerate(cmds):
        *prepare, argv = parts
        for pre in prepare:
            subprocess.run(pre, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        times[i].append(((time.perf_counter() - t0) * 1000, (ru.ru_utime + ru.ru_stime) * 1000))
per = len(cmds) // 2
for b, label in enumerate(os.environ.get("LABELS", "old,new").split(",")):
    cells = []
    for k in range(per):
        t = times[b * per + k]
        wall, cpu = statistics.median(x[0] for x in t), statistics.median(x[1] for x in t)
        if k == 0:
            base = (wall, cpu)
            cells.append("%.2f / %.2f" % (wall, cpu))
        else:
            cells.append("%.2f / %.2f (%.2fx / %.2fx)" % (wall, cpu, wall / base[0], cpu / base[1]))
    print("| %s, %s, interleaved | %s |" % (name, label, " | ".join(cells)))
