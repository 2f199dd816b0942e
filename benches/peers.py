#!/usr/bin/env python3
"""Runs one agent workflow on loopx and on the Python LoopX (the peer), command by command; prints tables.

Called by benches/peers.sh, which installs the peer and sets HOME, TMPDIR and caches to a scratch
directory. Per step: median wall time, peak RSS of the command (the peer's detached Node helper
apart), bytes of JSON on stdout, and peer/loopx ratios. Then claims per second with 1, 2, 4 and 8
agent processes on each tool.
"""
import argparse, json, os, statistics, subprocess, sys, time

p = argparse.ArgumentParser()
p.add_argument("--ours", required=True, help="path of the loopx binary")
p.add_argument("--peer", required=True, help="path of the peer's `loopx` script (in its venv)")
p.add_argument("--node-bin", required=True, help="directory holding the peer's `node`")
p.add_argument("--work", required=True, help="scratch directory for the projects")
p.add_argument("--runs", type=int, default=5, help="runs of each step on each tool")
p.add_argument("--todos", type=int, default=20, help="open todos in each workflow project")
p.add_argument("--window", type=float, default=10.0, help="seconds per claim race on the peer")
p.add_argument("--race-todos", type=int, default=16, help="open todos the peer's agents race for, per race")
a = p.parse_args()

OURS_ENV = dict(os.environ, LOOPX_OWNER_KEY=os.path.join(a.work, "owner.key"))
# Node on PATH for the peer only.
PEER_ENV = dict(os.environ, PATH=a.node_bin + ":" + os.path.dirname(a.peer) + ":" + os.environ["PATH"],
                LOOPX_USAGE_PING="0")
GOAL, RACE = "bench-goal", "race-goal"
VENV = os.path.dirname(os.path.dirname(os.path.abspath(a.peer)))
AGENTS = [f"a{i}" for i in range(1, 9)]


def run(cmd, env, cwd):
    """Runs cmd under GNU time; returns (wall seconds, peak RSS in KiB, stdout, exit code).

    GNU time, not this Python process, forks the command, so the peak is the command's own (a
    child forked from Python starts with Python's memory counted); the wall time includes GNU
    time's fork, well under a millisecond.
    """
    rss_file = os.path.join(a.work, ".rss")
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd], env=env, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    with open(rss_file) as f:
        rss = int(f.read().split()[-1])
    return wall, rss, proc.stdout, proc.returncode


def ours(project, *args, agent="a1"):
    """A loopx command line on project, as agent, answering in JSON."""
    return [a.ours, "--dir", project, "--agent", agent, "--json", *args]


def peer(*args):
    """A peer command line answering in JSON (it finds the project from its working directory)."""
    return [a.peer, "--format", "json", *args]


def helpers():
    """The peer's detached Node helpers under the scratch directory: {pid: (VmRSS KiB, VmHWM KiB)}."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            if "effect_runtime_server" not in cmdline or VENV not in cmdline:
                continue
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            found[int(pid)] = (int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0]))
        except (OSError, KeyError, ValueError):
            continue
    return found


def must(cmd, env, cwd):
    """Runs an untimed setup command; stops the benchmark when it fails."""
    _, _, out, rc = run(cmd, env, cwd)
    if rc != 0:
        sys.exit(f"setup failed ({rc}): {' '.join(cmd)}\n{out[:600].decode(errors='replace')}")
    try:
        return json.loads(out)
    except ValueError:
        return {}


def make_ours(d, todos):
    """A loopx project with `todos` open todos and a quota that never says no."""
    os.makedirs(d)
    must([a.ours, "start-goal", "--project", d, "--goal-text", "bench"], OURS_ENV, d)
    must([a.ours, "--dir", d, "owner", "init"], OURS_ENV, d)
    must([a.ours, "--dir", d, "quota", "set", "--slots", "100000", "--window", "24h",
          "--min-interval", "0s"], OURS_ENV, d)
    for i in range(todos):
        must(ours(d, "todo", "add", f"benchmark todo number {i}"), OURS_ENV, d)


def make_peer(d, todos, goal=GOAL):
    """A peer project with a goal, agents a1..a8 registered, and `todos` open agent todos; their ids."""
    os.makedirs(d)
    must(peer("bootstrap", "--project", d, "--goal-id", goal, "--objective", "bench"), PEER_ENV, d)
    must(peer("register-agent", "--goal-id", goal, *sum([["--agent-id", x] for x in AGENTS], []),
              "--execute"), PEER_ENV, d)
    return [must(peer("todo", "add", "--goal-id", goal, "--role", "agent", "--text",
                      f"benchmark todo number {i}"), PEER_ENV, d)["todo_id"] for i in range(todos)]


class Side:
    """One tool's project and what the workflow learnt on it (claimed ids, fences)."""

    def __init__(self, project, env):
        self.project, self.env, self.claimed, self.samples = project, env, [], {}

    def time(self, step, cmd, cwd=None):
        """Runs one timed command and keeps its sample; returns its JSON (or {})."""
        wall, rss, out, rc = run(cmd, self.env, cwd or self.project)
        self.samples.setdefault(step, []).append((wall, rss, len(out), rc))
        try:
            return json.loads(out)
        except ValueError:
            return {}


def workflow(o, q, peer_ids):
    """Every step, each run on loopx then the peer (order swapped every other run)."""
    runs = range(a.runs)

    def both(step, ours_cmd, peer_cmd, i, on_ours=None, on_peer=None):
        """Runs one step on both tools (each command with its working directory); samples the helper."""
        pair = [(o, ours_cmd, on_ours), (q, peer_cmd, on_peer)]
        for side, cmd, then in pair if i % 2 == 0 else pair[::-1]:
            answer = side.time(step, cmd[0], cmd[1])
            if then:
                then(answer)
            if side is q:
                for hpid, (rss, hwm) in helpers().items():
                    prev = q.samples.setdefault("helper", {}).get(hpid, (0, 0))
                    q.samples["helper"][hpid] = (max(prev[0], rss), max(prev[1], hwm))

    for i in runs:
        od, pd = os.path.join(a.work, f"o-start-{i}"), os.path.join(a.work, f"p-start-{i}")
        os.makedirs(od), os.makedirs(pd)
        both("start a goal", ([a.ours, "--json", "start-goal", "--project", od, "--goal-text", "bench"], od),
             (peer("bootstrap", "--project", pd, "--goal-id", f"start-{i}", "--objective", "bench"), pd), i)
    for i in runs:
        both("todo add", (ours(o.project, "todo", "add", f"added todo {i}"), None),
             (peer("todo", "add", "--goal-id", GOAL, "--role", "agent", "--text", f"added todo {i}"), None), i)
    for i in runs:
        both("should-run", (ours(o.project, "quota", "should-run"), None),
             (peer("quota", "should-run", "--goal-id", GOAL, "--agent-id", "a1"), None), i)
    for i in runs:
        both("status", (ours(o.project, "status"), None), (peer("status", "--goal-id", GOAL), None), i)
    for i in runs:
        both("todo list", (ours(o.project, "todo", "list"), None),
             (peer("todo", "list", "--goal-id", GOAL), None), i)
    for i in runs:
        t = peer_ids[i]
        both("todo claim", (ours(o.project, "todo", "claim"), None),
             (peer("todo", "claim", "--goal-id", GOAL, "--todo-id", t, "--agent-id", "a1", "--claimed-by", "a1",
                   "--task-lease-idempotency-key", f"k-{t}"), None), i,
             on_ours=lambda j: o.claimed.append((j["todo"]["id"], j["todo"]["fence"])),
             on_peer=lambda j, t=t: q.claimed.append((t, 1)))
    for i in runs:
        (ot, of), (pt, _) = o.claimed[i], q.claimed[i]
        both("todo update + evidence",
             (ours(o.project, "todo", "update", ot, "--fence", str(of), "--evidence", "ran tests: 3 passed"), None),
             (peer("todo", "update", "--goal-id", GOAL, "--todo-id", pt, "--agent-id", "a1",
                   "--evidence", "ran tests: 3 passed", "--note", "progress"), None), i)
    for i in runs:
        (ot, of), (pt, pv) = o.claimed[i], q.claimed[i]
        both("complete",
             (ours(o.project, "todo", "update", ot, "--fence", str(of), "--status", "done", "--evidence", "done"), None),
             (peer("todo", "complete", "--goal-id", GOAL, "--todo-id", pt, "--agent-id", "a1", "--evidence", "done",
                   "--task-lease-idempotency-key", f"k-{pt}", "--task-lease-expected-version", str(pv)), None), i)
    for i in runs:
        # The peer binds a spend to the todo its scheduler selects now (untimed look-up).
        _, _, out, _ = run(peer("quota", "should-run", "--goal-id", GOAL, "--agent-id", "a1"), PEER_ENV, q.project)
        selected = json.loads(out).get("selected_todo", {}).get("todo_id", "")
        both("quota spend-slot", (ours(o.project, "quota", "spend-slot"), None),
             (peer("quota", "spend-slot", "--goal-id", GOAL, "--agent-id", "a1", "--todo-id", selected,
                   "--execute", "--source", "heartbeat"), None), i)


def race(n, claim_cmd, ids, env, cwd, deadline):
    """n agent processes claim until their ids (or the todos) run out or the deadline; claims/s."""
    script = ("import subprocess,sys,time,json\n"
              "cmd,ids,end=json.loads(sys.argv[1]),json.loads(sys.argv[2]),float(sys.argv[3])\n"
              "n=0\n"
              "for t in ids or iter(int,1):\n"
              "    if time.time()>end: break\n"
              "    c=[x.replace('{ID}',str(t)) for x in cmd]\n"
              "    rc=subprocess.run(c,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL).returncode\n"
              "    if rc==0: n+=1\n"
              "    elif not ids: break\n"
              "print(n)\n")
    start, procs = time.time(), []
    for k in range(n):
        agent = AGENTS[k]
        mine = ids[k * len(ids) // n:] + ids[:k * len(ids) // n] if ids else []
        cmd = [x.replace("{AGENT}", agent) for x in claim_cmd]
        procs.append(subprocess.Popen([sys.executable, "-c", script, json.dumps(cmd), json.dumps(mine),
                                       str(start + deadline)], env=env, cwd=cwd, stdout=subprocess.PIPE))
    claims = sum(int(pr.communicate()[0] or 0) for pr in procs)
    return claims, time.time() - start


def claims_table(base):
    """Claims per second with 1, 2, 4 and 8 agents: loopx on 400 todos, the peer on --race-todos per race."""
    rows = []
    qd = os.path.join(base, "p-race")
    k = a.race_todos
    pool = make_peer(qd, 4 * k, RACE)
    for idx, n in enumerate([1, 2, 4, 8]):
        od = os.path.join(base, f"o-race-{n}")
        must([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen.py"), od,
              "--loopx", a.ours, "--open", "400", "--gates", "0"], OURS_ENV, base)
        rows.append((n, *race(n, [a.ours, "--dir", od, "--agent", "{AGENT}", "--json", "todo", "claim"],
                              [], OURS_ENV, od, 60.0),
                     *race(n, peer("todo", "claim", "--goal-id", RACE, "--todo-id", "{ID}", "--agent-id", "{AGENT}",
                                   "--claimed-by", "{AGENT}", "--task-lease-idempotency-key", "{AGENT}-{ID}"),
                           pool[idx * k:(idx + 1) * k], PEER_ENV, qd, a.window)))
    return rows


def ms(x):
    """Seconds as milliseconds for the table."""
    return f"{x * 1000:,.1f}" if x < 10 else f"{x * 1000:,.0f}"


def main():
    os.makedirs(a.work, exist_ok=True)
    od, qd = os.path.join(a.work, "o-main"), os.path.join(a.work, "p-main")
    make_ours(od, a.todos)
    o = Side(od, OURS_ENV)
    q = Side(qd, PEER_ENV)
    peer_ids = make_peer(qd, a.todos)
    workflow(o, q, peer_ids)
    print(f"{a.runs} runs of each step, interleaved; {a.todos} open todos before the adds.\n")
    print("| step | loopx ms | peer ms | time ratio | loopx peak RSS MiB | peer peak RSS MiB | memory ratio "
          "| loopx JSON bytes | peer JSON bytes | peer ok runs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for step, os_ in o.samples.items():
        ps = q.samples[step]
        ot, pt = statistics.median(s[0] for s in os_), statistics.median(s[0] for s in ps)
        om, pm = max(s[1] for s in os_) / 1024, max(s[1] for s in ps) / 1024
        ob, pb = statistics.median(s[2] for s in os_), statistics.median(s[2] for s in ps)
        bad = sum(s[3] != 0 for s in os_)
        print(f"| {step} | {ms(ot)} | {ms(pt)} | {pt / ot:,.0f}x | {om:.1f} | {pm:.1f} | {pm / om:.0f}x "
              f"| {ob:,.0f} | {pb:,.0f} | {sum(s[3] == 0 for s in ps)}/{len(ps)} |"
              + (f" loopx failed {bad}" if bad else ""))
    for hpid, (rss, hwm) in q.samples.get("helper", {}).items():
        print(f"\nPeer's detached Node helper (pid {hpid}): RSS up to {rss / 1024:.0f} MiB, peak {hwm / 1024:.0f} MiB.")
    print("\n| agents | loopx claims | loopx s | loopx claims/s | peer claims | peer s | peer claims/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, oc, ow, pc, pw in claims_table(a.work):
        orate, prate = oc / ow, pc / pw
        ratio = f"{orate / prate:,.0f}x" if prate else "-"
        print(f"| {n} | {oc} | {ow:.2f} | {orate:,.0f} | {pc} | {pw:.1f} | {prate:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
