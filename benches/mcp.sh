#!/usr/bin/env bash
# MCP tool calls against the same CLI commands, at 100 and 1,000 open todos (release build).
# usage: cargo build --release && benches/mcp.sh        (needs hyperfine, python3)
# The MCP side is benches/mcp_bench.py's raw client: JSON-RPC lines over the server's pipes,
# the median of 300 calls each; the CLI side is hyperfine's median of 40 runs of `--json`.
# The hour-long memory soak is separate (it needs the Python `mcp` package):
#   python benches/mcp_bench.py target/release/loopx PROJECT soak 3600 10
set -euo pipefail
cd "$(dirname "$0")/.."
L=$PWD/target/release/loopx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { # command... -> median ms (non-zero exits are answers here: should-run says 3)
  hyperfine -N -i --warmup 3 --runs 40 --export-json "$work/h.json" "$@" >/dev/null 2>&1
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("%.2f" % (r["median"]*1000))' "$work/h.json"
}

echo "| project | tool | MCP call ms | CLI command ms | MCP server RSS MB |"
echo "| --- | --- | --- | --- | --- |"
for n in 100 1000; do
  d="$work/p$n"
  python3 benches/gen.py "$d" --loopx "$L" --open "$n" >/dev/null
  "$L" --dir "$d" status >/dev/null
  id=$("$L" --dir "$d" todo list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["todos"][0]["id"])')
  mcp=$(python3 benches/mcp_bench.py "$L" "$d" latency 300)
  rss=$(echo "$mcp" | awk '$1 == "rss_mb" { print $2 }')
  for pair in "should_run:quota should-run" "status:status" "todo_show:todo show $id"; do
    tool=${pair%%:*}
    cli=$(median "$L --dir $d --agent bench ${pair#*:} --json")
    m=$(echo "$mcp" | awk -v t="$tool" '$1 == t { print $2 }')
    echo "| $n open | $tool | $m | $cli | $rss |"
  done
done
