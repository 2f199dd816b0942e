"""MCP server speed and memory, measured from clients.

usage: python benches/mcp_bench.py LOOPX PROJECT latency N       per-call medians over N calls, raw pipe
       python benches/mcp_bench.py LOOPX PROJECT soak SECONDS RATE   the official SDK client calling
                                                    RATE tools/s; the server's RSS each minute
The raw client writes JSON-RPC lines and reads each answer, so the time is the server's (plus
a pipe round trip); the soak uses the Python `mcp` package, as an agent host would.
"""

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time


def rss_kb(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def latency(loopx, project, n):
    p = subprocess.Popen([loopx, "--agent", "bench", "mcp"], cwd=project, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    ident = [0]

    def rpc(method, params=None, notify=False):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            ident[0] += 1
            msg["id"] = ident[0]
        p.stdin.write(json.dumps(msg) + "\n")
        p.stdin.flush()
        return None if notify else json.loads(p.stdout.readline())

    rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}})
    rpc("notifications/initialized", notify=True)
    for tool, args in (("should_run", {}), ("status", {}), ("todo_show", None)):
        if args is None:
            listed = rpc("tools/call", {"name": "todo_list", "arguments": {}})
            todos = listed["result"]["structuredContent"]["todos"]
            args = {"id": todos[0]["id"]}
        times = []
        for _ in range(n):
            t = time.perf_counter()
            r = rpc("tools/call", {"name": tool, "arguments": args})
            times.append((time.perf_counter() - t) * 1000)
            assert "result" in r, r
        print(f"{tool} {statistics.median(times):.2f}")
    print(f"rss_mb {rss_kb(p.pid) / 1024:.1f}")
    p.stdin.close()
    p.wait()


async def soak(loopx, project, seconds, rate):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    params = StdioServerParameters(command=loopx, args=["--agent", "soak", "mcp"], cwd=project)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            me = os.getpid()
            kids = [int(c) for t in os.listdir(f"/proc/{me}/task")
                    for c in open(f"/proc/{me}/task/{t}/children").read().split()]
            pid = kids[0]
            start = time.monotonic()
            calls, next_sample, minute = 0, start, 0
            tools = ("should_run", "status", "todo_list", "refresh_state")
            while time.monotonic() - start < seconds:
                r = await s.call_tool(tools[calls % len(tools)], {})
                assert r.structured_content is not None
                calls += 1
                if time.monotonic() >= next_sample:
                    print(json.dumps({"minute": minute, "calls": calls, "rss_mb": round(rss_kb(pid) / 1024, 1),
                                      "hwm_mb": round(rss_kb(pid, "VmHWM") / 1024, 1)}), flush=True)
                    minute += 1
                    next_sample += 60
                await asyncio.sleep(max(0.0, 1 / rate - 0.0005))
            print(json.dumps({"end": True, "calls": calls, "rss_mb": round(rss_kb(pid) / 1024, 1),
                              "hwm_mb": round(rss_kb(pid, "VmHWM") / 1024, 1)}), flush=True)


def main():
    loopx, project, mode = sys.argv[1:4]
    if mode == "latency":
        latency(loopx, project, int(sys.argv[4]))
    else:
        import asyncio
        asyncio.run(soak(loopx, project, float(sys.argv[4]), float(sys.argv[5])))


if __name__ == "__main__":
    main()
