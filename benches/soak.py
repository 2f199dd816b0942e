#!/usr/bin/env python3
"""The soak (issue 13): agents in `loopx heartbeat` loops, a chaos loop, the invariants, the figures.

`soak.py run SECONDS --dir D --loopx BIN` runs it (benches/soak.sh is the front door);
`soak.py check --dir D` checks a finished run's directory again; `soak.py reap TAG` kills what a
run left behind (every process whose environment holds SOAK_TAG=TAG). Python 3 standard library.
"""
import argparse, json, os, random, signal, subprocess, sys, threading, time
from pathlib import Path

KINDS = ["ok", "ok", "flaky", "slow", "ok", "hang"]  # the mix of turns, by todo
TTL, TIMEOUT, GRACE, EVERY = "15s", "3s", "1s", "1s"
STUCK_S = 30  # an agent alive this long without a line while work is ready is stuck
WORK_SH = r"""#!/usr/bin/env bash
# A soak turn: its kind is the todo's title's second word; half the non-ok runs misbehave.
kind=${LOOPX_TODO_TITLE#soak }; kind=${kind%% *}
bad=$((RANDOM % 2))
case "$kind" in
  ok) sleep "0.$((RANDOM % 5 + 1))"; echo "did $LOOPX_TODO_ID" ;;
  flaky) sleep 0.2; if [ "$bad" = 0 ]; then echo "flaked" >&2; exit 1; fi ;;
  slow) if [ "$bad" = 0 ]; then exec sleep 600; fi; sleep 0.3 ;;
  hang) if [ "$bad" = 0 ]; then trap '' TERM; while :; do sleep 1; done; fi; sleep 0.1 ;;
  *) echo "unknown kind $kind" >&2; exit 2 ;;
esac
"""


def now():
    return time.time()


def ts(s):
    """Seconds since the epoch of a journal time (`2026-12-01T11:08:07.084Z`)."""
    from datetime import datetime, timezone
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def jsonl(path, tolerate_tail=True):
    """The JSON lines of a file, and how many lines did not parse."""
    rows, bad = [], 0
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return rows, 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            bad += 1
    return rows, bad


class Soak:
    """One run's directory, binary and shared counters."""

    def __init__(self, d, loopx, agents=8, skew=0, faketime=None):
        self.d = Path(d).resolve()
        self.proj, self.out = self.d / "proj", self.d / "out"
        self.loopx, self.agents, self.skew, self.faketime = os.path.realpath(loopx), agents, skew, faketime
        self.stop = threading.Event()
        self.procs, self.lock = {}, threading.Lock()
        self.starts = {f"a{i}": 0 for i in range(1, agents + 1)}
        self.kills, self.n_todos = 0, 0

    def env(self, owner):
        e = dict(os.environ, LOOPX_DIR=str(self.proj))
        e["LOOPX_OWNER_KEY"] = str(self.d / ("owner.key" if owner else "no-owner.key"))
        return e

    def lx(self, *args, owner=False, agent="chaos"):
        """Runs loopx --json; returns (exit code, the JSON object or None)."""
        cmd = [self.loopx, "--agent", agent, "--json", *args]
        try:
            r = subprocess.run(cmd, env=self.env(owner), capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return -1, None
        try:
            return r.returncode, json.loads(r.stdout)
        except ValueError:
            return r.returncode, None

    def log(self, name, row):
        row = dict(row, t=round(now(), 3))
        with open(self.out / name, "a") as f:
            f.write(json.dumps(row) + "\n")

    # --- setup -----------------------------------------------------------------------------
    def setup(self):
        self.out.mkdir(parents=True, exist_ok=True)
        self.proj.mkdir(parents=True, exist_ok=True)
        (self.d / "work.sh").write_text(WORK_SH)
        run = lambda *a: subprocess.run([self.loopx, *a], env=self.env(True), check=True,
                                        stdout=subprocess.DEVNULL)
        run("start-goal", "--project", str(self.proj), "--goal-text", "soak")
        run("owner", "init")
        run("quota", "set", "--slots", "100000", "--window", "10m", "--min-interval", "0s")
        self.add_todos(3 * self.agents)

    def add_todos(self, n):
        for _ in range(n):
            kind = KINDS[self.n_todos % len(KINDS)]
            self.n_todos += 1
            rc, _ = self.lx("todo", "add", f"soak {kind} {self.n_todos}", "--priority",
                            random.choice(["P1", "P2", "P3"]), agent="planner")
            self.log("chaos.jsonl", {"action": "add", "rc": rc})

    # --- agents ----------------------------------------------------------------------------
    def agent_cmd(self, name):
        cmd = [self.loopx, "--agent", name, "heartbeat", "--json", "--every", EVERY,
               "--complete-on-success", "--timeout", TIMEOUT, "--grace", GRACE, "--ttl", TTL,
               "--", "bash", str(self.d / "work.sh")]
        if self.faketime and name == f"a{self.agents}":
            # The wall clock only: a faked monotonic clock stops `--timeout` from ever firing.
            cmd = ["env", "FAKETIME_DONT_FAKE_MONOTONIC=1", self.faketime, "-f", f"+{self.skew}s", *cmd]
        return cmd

    def supervise(self, name):
        """Keeps one agent's heartbeat running (it stops when the goal pauses, or is killed)."""
        while not self.stop.is_set():
            with open(self.out / f"{name}.jsonl", "a") as o, open(self.out / f"{name}.err", "a") as e:
                p = subprocess.Popen(self.agent_cmd(name), stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                     env=self.env(False), start_new_session=True)
                with self.lock:
                    self.procs[name] = (p, now())
                    self.starts[name] += 1
                rc = p.wait()
            self.log("agents.jsonl", {"agent": name, "exit": rc})
            self.stop.wait(0.5)

    # --- chaos -----------------------------------------------------------------------------
    def chaos(self):
        acts = [self.kill, self.reassign, self.gate_open, self.gate_decide, self.pause, self.top_up]
        first, t0 = True, now()
        while len(self.procs) < self.agents and now() < t0 + 30:  # every agent up first
            self.stop.wait(0.1)
        while not self.stop.is_set():
            order = acts[:]
            random.shuffle(order)
            for act in order:
                if self.stop.is_set():
                    return
                act()
                self.stop.wait(0.3 if first else random.uniform(1.0, 3.0))
            first = False

    def kill(self):
        for _ in range(20):  # an agent may be between two heartbeats (the goal was paused)
            with self.lock:
                live = [(n, p) for n, (p, _) in self.procs.items() if p.poll() is None]
            if live or self.stop.wait(0.25):
                break
        if not live:
            return self.log("chaos.jsonl", {"action": "kill", "skipped": "no live agent"})
        name, p = random.choice(live)
        try:
            os.killpg(p.pid, signal.SIGKILL)
            self.kills += 1
            self.log("chaos.jsonl", {"action": "kill", "agent": name, "pid": p.pid})
        except ProcessLookupError:
            self.log("chaos.jsonl", {"action": "kill", "skipped": "gone"})

    def todos(self):
        _, v = self.lx("todo", "list")
        return (v or {}).get("todos", [])

    def reassign(self):
        ts_ = self.todos()
        leased = [t for t in ts_ if t.get("lease")] or [t for t in ts_ if t["status"] == "open"]
        if not leased:
            return self.log("chaos.jsonl", {"action": "reassign", "skipped": "no todo"})
        t = random.choice(leased)
        # A third go to an agent that never runs: its lease must expire and be reclaimed.
        to = "ghost" if random.random() < 0.34 else f"a{random.randint(1, self.agents)}"
        rc, v = self.lx("todo", "reassign", t["id"], "--to", to, "--ttl", TTL, owner=True)
        self.log("chaos.jsonl", {"action": "reassign", "todo": t["id"], "to": to, "rc": rc,
                                 "ok": bool(v and v.get("ok"))})

    def gate_open(self):
        open_ = [t for t in self.todos() if t["status"] == "open"]
        args = ["gate", "open", f"soak question {now():.0f}", "--option", "yes", "--option", "no"]
        if open_ and random.random() < 0.8:
            args += ["--blocks", random.choice(open_)["id"]]
        else:
            args += ["--global"]
        rc, v = self.lx(*args, agent=f"a{random.randint(1, self.agents)}")
        self.log("chaos.jsonl", {"action": "gate_open", "rc": rc, "ok": bool(v and v.get("ok")),
                                 "global": "--global" in args})

    def gate_decide(self):
        _, v = self.lx("gate", "list")
        for g in (v or {}).get("gates", []):
            if g.get("status") != "pending":
                continue
            verb = random.choice(["approve", "approve", "reject"])
            extra = ["--option", "yes"] if verb == "approve" else ["--reason", "soak"]
            rc, r = self.lx("gate", verb, g["id"], *extra, owner=True)
            self.log("chaos.jsonl", {"action": "gate_" + verb, "gate": g["id"], "rc": rc,
                                     "ok": bool(r and r.get("ok"))})
        for t in self.todos():  # a rejection blocks its todos: the owner sends them back
            if t["status"] == "blocked":
                rc, _ = self.lx("todo", "reopen", t["id"], owner=True)
                self.log("chaos.jsonl", {"action": "reopen", "todo": t["id"], "rc": rc})

    def pause(self):
        rc, _ = self.lx("goal", "pause", owner=True)
        self.log("chaos.jsonl", {"action": "pause", "rc": rc})
        self.stop.wait(2)
        rc, _ = self.lx("goal", "resume", owner=True)
        self.log("chaos.jsonl", {"action": "resume", "rc": rc})

    def top_up(self):
        n = sum(1 for t in self.todos() if t["status"] == "open")
        self.add_todos(max(0, 3 * self.agents - n))

    # --- memory ----------------------------------------------------------------------------
    def sample_memory(self, t0):
        with self.lock:
            live = [(n, p) for n, (p, _) in self.procs.items() if p.poll() is None]
        groups = {}
        for e in os.listdir("/proc"):
            try:
                if e.isdigit() and os.readlink(f"/proc/{e}/exe") == self.loopx:
                    groups.setdefault(os.getpgid(int(e)), []).append(int(e))
            except OSError:
                pass
        for name, p in live:
            pid = min(groups.get(p.pid, [p.pid]))  # the heartbeat, under faketime too
            try:
                st = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            kb = {k: int(v.split()[0]) for k, v in (l.split(":", 1) for l in st.splitlines())
                  if k in ("VmRSS", "VmHWM")}
            self.log("mem.jsonl", {"s": round(now() - t0), "agent": name, "pid": pid, **kb})

    def stuck(self):
        """Agents alive past STUCK_S with no line for STUCK_S, while work is ready."""
        _, st = self.lx("status")
        if not st or st.get("goal", {}).get("status") != "active" or not st.get("ready"):
            return []
        out = []
        with self.lock:
            procs = list(self.procs.items())
        for name, (p, started) in procs:
            f = self.out / f"{name}.jsonl"
            quiet = now() - max(started, f.stat().st_mtime if f.exists() else 0)
            if p.poll() is None and quiet > STUCK_S:
                out.append(f"{name} printed nothing for {quiet:.0f}s while {st['ready']} todos were ready")
        return out

    # --- the run ---------------------------------------------------------------------------
    def run(self, seconds, check_every):
        t0 = now()
        self.setup()
        threads = [threading.Thread(target=self.supervise, args=(f"a{i}",), daemon=True)
                   for i in range(1, self.agents + 1)]
        threads.append(threading.Thread(target=self.chaos, daemon=True))
        for t in threads:
            t.start()
        violations, next_check, next_mem = [], t0 + check_every, t0
        while now() < t0 + seconds:
            if now() >= next_mem:
                self.sample_memory(t0)
                next_mem += 10
            if now() >= next_check:
                v = check(self, final=False) + self.stuck()
                self.log("checks.jsonl", {"s": round(now() - t0), "violations": v})
                violations += v
                next_check += check_every
            time.sleep(0.5)
        self.sample_memory(t0)
        self.stop.set()
        threads[-1].join(timeout=70)  # the chaos loop ends its step first
        self.shutdown()
        for t in threads:
            t.join(timeout=70)
        v = check(self, final=True)
        self.log("checks.jsonl", {"s": round(now() - t0), "final": True, "violations": v})
        violations += v
        rep = figures(self, now() - t0, violations)
        (self.out / "report.json").write_text(json.dumps(rep, indent=1))
        print_report(rep)
        return 1 if violations else 0

    def shutdown(self):
        """SIGTERM each agent's group, SIGKILL what is left after 5 s, then reap by tag."""
        with self.lock:
            procs = [p for p, _ in self.procs.values()]
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = now() + 5
        for p in procs:
            try:
                p.wait(timeout=max(0.1, end - now()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if os.environ.get("SOAK_TAG"):
            reap(os.environ["SOAK_TAG"])


def reap(tag):
    """SIGKILLs every process (not this one nor its ancestors) whose environment holds the tag."""
    mine, pid = set(), os.getpid()
    while pid > 1:
        mine.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    needle, n = f"SOAK_TAG={tag}".encode(), 0
    for e in os.listdir("/proc"):
        if not e.isdigit() or int(e) in mine:
            continue
        try:
            if needle in Path(f"/proc/{e}/environ").read_bytes().split(b"\0"):
                os.kill(int(e), signal.SIGKILL)
                n += 1
        except OSError:
            pass
    return n


# --- the invariants ------------------------------------------------------------------------
def acks(s):
    """Every turn an agent acknowledged (an `ok` line with a turn), and the lines that did not parse."""
    out, torn, refused = [], 0, 0
    for f in sorted(s.out.glob("a*.jsonl")):
        rows, bad = jsonl(f)
        torn += bad
        for r in rows:
            if "turn" in r and "todo" in r:
                if r.get("ok"):
                    out.append(dict(r, agent=f.stem))
                else:
                    refused += 1
    return out, torn, refused


def lease_replay(events, tol):
    """Replays leases from the journal: no claim while another agent's lease is live."""
    v, holder, fence = [], {}, {}
    for e in events:
        a, tgt, d = e["action"], e["target"], e.get("data") or {}
        if a == "todo.claim":
            rf = d.get("reclaimed_from")
            if rf:
                if ts(rf["expired_at"]) > ts(e["at"]) + tol:
                    v.append(f"seq {e['seq']}: {e['actor']} reclaimed {tgt} from {rf.get('holder')} "
                             f"whose lease ran to {rf['expired_at']}")
            elif holder.get(tgt) not in (None, e["actor"]):
                v.append(f"seq {e['seq']}: {e['actor']} claimed {tgt} held by {holder[tgt]}")
            if d.get("fence", 0) <= fence.get(tgt, 0):
                v.append(f"seq {e['seq']}: fence of {tgt} went from {fence[tgt]} to {d.get('fence')}")
            holder[tgt], fence[tgt] = e["actor"], d.get("fence", 0)
        elif a in ("todo.reassign", "todo.handoff"):
            holder[tgt], fence[tgt] = d.get("to"), d.get("fence", 0)
        elif a == "todo.renew" and holder.get(tgt) not in (None, e["actor"]):
            v.append(f"seq {e['seq']}: {e['actor']} renewed {tgt} held by {holder[tgt]}")
        elif a in ("todo.release", "todo.done", "lease.expire", "todo.block", "todo.cancel",
                   "todo.defer"):
            holder[tgt] = None
    return v


def check(s, final):
    """The invariants, on what the agents printed and what the store holds; a list of violations."""
    ack, _, _ = acks(s)  # read first: anything acknowledged is in the store by now
    lx = s.proj / ".loopx"
    events, bad = jsonl(lx / "journal.jsonl")
    v = [f"journal: {bad} lines that are not JSON"] if bad and final else []
    spent = {(e.get("data") or {}).get("turn") for e in events if e["action"] == "quota.spend"}
    evid = {}
    for a in ack:
        tid = a["todo"]["id"]
        if tid not in evid:
            rows, _ = jsonl(lx / "evidence" / f"{tid}.jsonl")
            evid[tid] = {r.get("turn") for r in rows}
        if a["turn"] not in evid[tid]:
            v.append(f"{a['agent']} acknowledged turn {a['turn']} on {tid}: no evidence of it")
        if a["turn"] not in spent:
            v.append(f"{a['agent']} acknowledged turn {a['turn']}: no spend of it")
    done = {}
    for e in events:
        if e["action"] == "todo.done":
            done[e["target"]] = done.get(e["target"], 0) + 1
    v += [f"{t} finished {n} times in the journal" for t, n in done.items() if n > 1]
    acked_done = {}
    for a in ack:
        if a.get("ended") == "done":
            acked_done.setdefault(a["todo"]["id"], []).append(a["turn"])
    v += [f"{t} finished by {len(u)} acknowledged turns" for t, u in acked_done.items() if len(u) > 1]
    v += lease_replay(events, s.skew + 1.0)
    _, ag = s.lx("agents")
    held = {}
    for a in (ag or {}).get("agents", []):
        for l in a.get("leases", []):
            lid = l if isinstance(l, str) else l.get("id") or l.get("todo")
            held.setdefault(json.dumps(lid), []).append(a["agent"])
    v += [f"{t} held by {h}" for t, h in held.items() if len(h) > 1]
    rc, lv = s.lx("log", "--verify", "--limit", "1")
    if rc != 0 or not lv or not lv.get("ok") or (final and lv.get("torn")):
        v.append(f"log --verify: exit {rc}: {lv}")
    # Healthy: exit 0 and no errors (warnings, like a dead agent's expired lease, are healthy).
    # During the run, a lock too busy to take is not a fault of the state.
    rc, dv = s.lx("doctor")
    errs = [f for f in (dv or {}).get("findings", []) if f.get("severity") != "warning"
            and (final or f.get("file") != ".loopx/lock")]
    if errs or (final and rc != 0) or dv is None:
        v.append(f"doctor: exit {rc}: {errs}")
    return v


# --- the figures ---------------------------------------------------------------------------
def figures(s, secs, violations):
    """What the run did, from its logs and the journal."""
    ack, torn, refused = acks(s)
    chaos, _ = jsonl(s.out / "chaos.jsonl")
    events, _ = jsonl(s.proj / ".loopx" / "journal.jsonl")
    mem, _ = jsonl(s.out / "mem.jsonl")
    count = lambda act: sum(1 for c in chaos if c.get("action") == act and "skipped" not in c)
    ev = lambda act: sum(1 for e in events if e["action"] == act)
    ended = {}
    for a in ack:
        ended[a.get("ended")] = ended.get(a.get("ended"), 0) + 1
    per = {}
    for m in mem:
        per.setdefault(m["agent"], []).append((m["s"], m.get("VmRSS", 0), m.get("VmHWM", 0)))
    minutes = max(secs / 60, 1e-9)
    return {
        "seconds": round(secs), "agents": s.agents,
        "faketime": f"a{s.agents} at +{s.skew}s" if s.faketime else "skipped",
        "turns": len(ack), "turns_by_end": ended, "timed_out": sum(1 for a in ack if a.get("timed_out")),
        "refused_turns": refused, "torn_lines": torn,
        "kills": s.kills, "starts": s.starts,
        "reclaims": sum(1 for e in events if e["action"] == "todo.claim"
                        and (e.get("data") or {}).get("reclaimed_from")),
        "lease_expiries": ev("lease.expire"), "reassigns": ev("todo.reassign"),
        "gates_opened": ev("gate.open"), "gates_decided": count("gate_approve") + count("gate_reject"),
        "pauses": ev("goal.pause"), "resumes": ev("goal.resume"),
        "todos_added": ev("todo.add"), "todos_done": ev("todo.done"), "journal_events": len(events),
        "turns_per_min": round(len(ack) / minutes, 1), "done_per_min": round(ev("todo.done") / minutes, 1),
        "memory_kb": {a: {"samples": len(r), "rss_first": r[0][1], "rss_last": r[-1][1],
                          "rss_max": max(x[1] for x in r), "hwm_max": max(x[2] for x in r),
                          "over_time": [[x[0], x[1]] for x in r]} for a, r in sorted(per.items())},
        "violations": violations,
    }


def print_report(r):
    keys = ["seconds", "agents", "faketime", "turns", "turns_by_end", "timed_out", "refused_turns",
            "torn_lines", "kills", "reclaims", "lease_expiries", "reassigns", "gates_opened",
            "gates_decided", "pauses", "todos_added", "todos_done", "journal_events",
            "turns_per_min", "done_per_min"]
    for k in keys:
        print(f"{k:>16}: {r[k] if not isinstance(r[k], dict) else json.dumps(r[k])}")
    print("memory (RSS kB of each agent's heartbeat: first, last, max; samples every 10 s):")
    for a, m in r["memory_kb"].items():
        print(f"  {a:>4}: {m['rss_first']} {m['rss_last']} {m['rss_max']} ({m['samples']} samples)")
    print(f"violations: {len(r['violations'])}")
    for x in r["violations"][:50]:
        print("  " + x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the soak for SECONDS")
    r.add_argument("seconds", type=int)
    r.add_argument("--dir", required=True)
    r.add_argument("--loopx", required=True)
    r.add_argument("--agents", type=int, default=8)
    r.add_argument("--check-every", type=int, default=60)
    r.add_argument("--faketime", default="", help="the faketime binary; empty skips the shifted clock")
    r.add_argument("--skew", type=int, default=4, help="seconds ahead for the faketime agent")
    c = sub.add_parser("check", help="check a finished run's directory again")
    c.add_argument("--dir", required=True)
    c.add_argument("--loopx", required=True)
    c.add_argument("--skew", type=int, default=4)
    k = sub.add_parser("reap", help="kill what a run left behind")
    k.add_argument("tag")
    a = p.parse_args()
    if a.cmd == "reap":
        print(f"reaped {reap(a.tag)}")
        return 0
    if a.cmd == "check":
        v = check(Soak(a.dir, a.loopx, skew=a.skew), final=True)
        print("\n".join(v) or "no violations")
        return 1 if v else 0
    s = Soak(a.dir, a.loopx, a.agents, a.skew if a.faketime else 0, a.faketime or None)
    return s.run(a.seconds, a.check_every)


if __name__ == "__main__":
    sys.exit(main())
