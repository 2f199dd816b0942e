#!/usr/bin/env python3
"""Makes a loopx project of a given size for the benchmarks (writes .loopx/ files directly)."""
import argparse, os, random, subprocess, json

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--loopx", default="target/release/loopx")
p.add_argument("--open", type=int, default=100)
p.add_argument("--archived", type=int, default=0)
p.add_argument("--evidence", type=int, default=0, help="entries on the first todo")
p.add_argument("--gates", type=int, default=3)
p.add_argument("--caps", type=int, default=0,
               help="each open todo requires one of N capabilities; agents cap0..capN-1 declare one each")
p.add_argument("--owner", action="store_true", help="run `owner init` last (LOOPX_OWNER_KEY names the key)")
a = p.parse_args()

os.makedirs(a.dir, exist_ok=True)
subprocess.run([a.loopx, "start-goal", "--project", a.dir, "--goal-text", "bench"], check=True,
               stdout=subprocess.DEVNULL)
L = os.path.join(a.dir, ".loopx")
alpha = "abcdefghijklmnopqrstuvwxyz234567"
seen = set()
def new_id(prefix):
    while True:
        i = prefix + "".join(random.choice(alpha) for _ in range(6))
        if i not in seen:
            seen.add(i)
            return i

def todo(i, status, n):
    req = f'requires = ["cap{n % a.caps}"]\n' if a.caps and status == "open" else ""
    return req + f'''schema_version = 1
id = "{i}"
title = "benchmark todo number {n} with a realistic title"
role = "agent"
priority = "P{n % 5}"
status = "{status}"
created_by = "gen"
created_at = "2026-11-01T00:00:{n % 60:02d}.{n % 1000:03d}Z"
updated_at = "2026-11-01T00:00:00.000Z"
fence = 0
'''

open_ids = []
for n in range(a.open):
    i = new_id("t-")
    open_ids.append(i)
    with open(os.path.join(L, "todos", i + ".toml"), "w") as f:
        f.write(todo(i, "open", n))
for n in range(a.archived):
    i = new_id("t-")
    with open(os.path.join(L, "archive", i + ".toml"), "w") as f:
        f.write(todo(i, "done", n))
for n in range(a.gates):
    g = new_id("g-")
    with open(os.path.join(L, "gates", g + ".toml"), "w") as f:
        f.write(f'''schema_version = 1
id = "{g}"
question = "May I use the staging database for run {n}?"
opened_by = "gen"
opened_at = "2026-11-01T00:00:00.000Z"
status = "pending"
''')
if a.evidence and open_ids:
    with open(os.path.join(L, "evidence", open_ids[0] + ".jsonl"), "w") as f:
        for n in range(a.evidence):
            f.write(json.dumps({"at": "2026-11-01T00:00:00.000Z", "agent": "gen", "fence": 1,
                                "kind": "note", "summary": f"step {n} passed"}) + "\n")
if a.caps:
    os.makedirs(os.path.join(L, "agents"), exist_ok=True)
    for k in range(a.caps):
        with open(os.path.join(L, "agents", f"cap{k}.toml"), "w") as f:
            f.write(f'id = "cap{k}"\ncapabilities = ["cap{k}"]\nupdated_at = "2026-11-01T00:00:00.000Z"\n')
if a.owner:
    subprocess.run([a.loopx, "--dir", a.dir, "owner", "init"], check=True, stdout=subprocess.DEVNULL)
print(L)
