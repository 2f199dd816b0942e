#!/usr/bin/env python3
"""Writes link/hot_text.ld: the functions that short commands run, linked together.

usage: benches/hot_text.py BIN OUT.ld CALLGRIND_OUT...
       benches/hot_text.py --check BIN CALLGRIND_OUT...   (exit 1 when the script is stale)
Each CALLGRIND_OUT is `valgrind --tool=callgrind --dump-instr=yes` of BIN (benches/hot_text.sh
makes them). Every function of BIN with an executed instruction is named in the order the runs
first need it, with LLVM's `.llvm.N` number made a wildcard (most edits of a module change it).
It is named again with its hashes made wildcards (another toolchain, or a change of its type's
hash): next to it when that name matches no other function of BIN, else after all the others
(a generic's other instances would part the code that runs). A name that matches nothing
costs nothing. `--check` says whether the script still holds what the runs execute.
"""
import bisect, collections, os, re, subprocess, sys


def symbols(binp):
    """(start, size, mangled name) of every function symbol, sorted by start."""
    out = subprocess.run(["nm", "-S", binp], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) ([0-9a-f]+) [tTwW] (.*)", line)
        if m:
            syms.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    return sorted(syms)


def demangled_starts(binp):
    out = subprocess.run(["nm", "-C", binp], capture_output=True, text=True, check=True).stdout
    starts = {}
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) [tT] (.*)", line)
        if m:
            starts.setdefault(m.group(2), int(m.group(1), 16))
    return starts


def objects(path, binp):
    """Yields (is BIN's own object, is valgrind's unknown object, line) for each line."""
    names, own, unknown = {}, False, False
    for line in open(path):
        m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                name = names.get(m.group(2), "")
                own, unknown = name == os.path.realpath(binp), name == "???"
        yield own, unknown, line


def load_base(path, binp, starts):
    """Where valgrind loaded BIN. Code outside `.text` (in `.text.hot`) is not in the object
    valgrind knows and is given by absolute address: the commonest offset between such a
    function's first cost line and its symbol."""
    votes, names, want = collections.Counter(), {}, None
    for own, unknown, line in objects(path, binp):
        if not unknown:
            continue
        if line.startswith("fn="):
            m = re.match(r"fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m.group(2):
                names[m.group(1)] = m.group(2)
            want = names.get(m.group(1))
        elif want and line.startswith("0x"):
            if want in starts:
                votes[int(line.split()[0], 16) - starts[want]] += 1
            want = None
    return votes.most_common(1)[0][0] if votes else 0


def executed(path, binp, base):
    """Executed addresses of BIN (link-time), in the order of the file. valgrind gives those in
    BIN's own object as offsets from where it was loaded."""
    addr = 0
    for own, unknown, line in objects(path, binp):
        if not line.strip() or line[0] == "#":
            continue
        tok = line.split(" ", 1)[0].strip()
        if "=" in tok:
            continue
        if tok.startswith("0x"):
            addr = int(tok, 16)
        elif tok[0] in "+-":
            v = int(tok[1:], 16) if tok[1:].startswith("0x") else int(tok[1:])
            addr += v if tok[0] == "+" else -v
        elif tok != "*":
            continue
        if own:
            yield addr
        elif unknown:
            yield addr - base


def loose(name):
    """The name with what changes between toolchains made wildcards."""
    name = re.sub(r"\.llvm\.\d+$", ".llvm.*", name)
    name = re.sub(r"17h[0-9a-f]{16}E", "17h*E", name)
    if name.startswith("_R"):
        name = re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", name)
        name = re.sub(r"B[0-9A-Za-z]*_", "B*_", name)
    return name


def run_order(binp, syms, paths):
    """The start of each function of BIN that the runs execute, in the order first needed."""
    starts = [s[0] for s in syms]
    dem = demangled_starts(binp)
    order, seen = [], set()
    for path in paths:
        for a in executed(path, binp, load_base(path, binp, dem)):
            i = bisect.bisect_right(starts, a) - 1
            if i < 0 or not (syms[i][0] <= a < syms[i][0] + max(syms[i][1], 1)):
                continue
            if syms[i][0] not in seen:
                seen.add(syms[i][0])
                order.append(syms[i][0])
    return order


def section(binp, name):
    """(start, end) of a section of BIN, or (0, 0)."""
    out = subprocess.run(["readelf", "-SW", binp], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[1] == name:
            return int(f[3], 16), int(f[3], 16) + int(f[5], 16)
    return 0, 0


# The most 64 KB windows outside `.text.hot` that the runs may touch: `_start`'s (the C runtime's
# object puts it in `.text`) and one more, for a small function that runs only with some todo
# ids (`str::contains` takes another path with other bytes). Each costs about 0.3 MB of peak RSS.
OUTSIDE_WINDOWS = 2


def check(binp, paths):
    """Prints where the code the runs execute lies; exits 1 when it touches more than
    OUTSIDE_WINDOWS windows of 64 KB outside `.text.hot`: each maps 64 KB of code or more."""
    syms = symbols(binp)
    size = {s[0]: s[1] for s in syms}
    name = {s[0]: s[2] for s in syms}
    lo, hi = section(binp, ".text.hot")
    order = run_order(binp, syms, paths)
    out = [a for a in order if not lo <= a < hi]
    win = lambda xs: len({a >> 16 for a in xs})
    print("%d functions run, %d KB; %d KB in .text.hot (%d KB, %d windows of 64 KB touched), "
          "%d outside it (%d KB, %d windows)" % (
              len(order), sum(size[a] for a in order) // 1024, (hi - lo) // 1024, 
              sum(size[a] for a in order if lo <= a < hi) // 1024, win(set(order) - set(out)),
              len(out), sum(size[a] for a in out) // 1024, win(out)))
    for a in out:
        print("  outside: %6d B  %s" % (size[a], name[a]))
    if win(out) > OUTSIDE_WINDOWS:
        print("link/hot_text.ld no longer holds the code these commands run: write it again with "
              "`cargo build --release && benches/hot_text.sh`, then commit it")
        sys.exit(1)


def main():
    if sys.argv[1] == "--check":
        return check(sys.argv[2], sys.argv[3:])
    binp, out = sys.argv[1], sys.argv[2]
    syms = symbols(binp)
    starts = [s[0] for s in syms]
    by_start = collections.defaultdict(list)
    for s in syms:
        by_start[s[0]].append(s[2])
    order = run_order(binp, syms, sys.argv[3:])
    exact = [n for a in order for n in by_start[a]]
    size = sum(syms[bisect.bisect_left(starts, a)][1] for a in order)
    # How many functions of BIN each loose name matches: one that matches only its own
    # function goes in place, so that the function stays where it runs after a rebuild changes
    # its hash; one that matches many (a generic's other instances) goes last.
    matches = collections.Counter(loose(s[2]) for s in syms)
    placed, last = [], []
    for n in exact:
        # `.llvm.N` is a number LLVM gives a local function, changed by most edits of its module.
        placed.append(re.sub(r"\.llvm\.\d+$", ".llvm.*", n))
        (placed if matches[loose(n)] == 1 else last).append(loose(n))
    pats, done = [], set()
    for n in placed + last:
        if n not in done and re.fullmatch(r"[A-Za-z0-9_$.*]+", n):
            done.add(n)
            pats.append(n)
    with open(out, "w") as f:
        f.write("/* Written by benches/hot_text.sh; see docs/benchmarks.md, \"Plain loads at scale\". */\n")
        f.write("SECTIONS {\n  .text.hot : {\n")
        # LLVM puts a function it deems cold in `.text.unlikely.NAME`: some of those run too.
        f.writelines("    *(.text.%s .text.unlikely.%s)\n" % (p, p) for p in pats)
        f.write("  }\n} INSERT BEFORE .text;\n")
    print("%d functions run, %d KB; %d patterns" % (len(order), size // 1024, len(pats)))


main()
