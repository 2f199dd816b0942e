"""A real MCP client (the official Python SDK, PyPI `mcp`) driving `loopx mcp` over stdio.

Usage: client.py LOOPX PROJECT SCRIPT_JSON. The script is a list of steps; each prints one JSON
line on stdout. tests/mcp.rs writes the scripts and checks the answers and the files on disk.
Steps: {"op": "tools"}, {"op": "call", "tool": T, "args": {...}}, {"op": "resources"},
{"op": "read", "uri": U}, {"op": "abandon", "tool": T, "args": {...}} (send a call, then leave
without its answer), {"op": "rounds", "n": N} (N rounds of should_run, status, todo_list).
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def emit(value):
    print(json.dumps(value), flush=True)


def answer(result):
    """The tool's --json answer, the exit code the server put in _meta, and the error flag."""
    meta = result.meta or {}
    text = result.content[0].text if result.content else None
    return {
        "is_error": bool(result.is_error),
        "answer": result.structured_content,
        "text_matches": text is not None and json.loads(text) == result.structured_content,
        "exit_code": meta.get("exit_code"),
    }


async def step(s, st):
    op = st["op"]
    if op == "tools":
        tools = (await s.list_tools()).tools
        return {t.name: {"schema": t.input_schema, "read_only": t.annotations.read_only_hint} for t in tools}
    if op == "call":
        try:
            return answer(await s.call_tool(st["tool"], st.get("args", {})))
        except Exception as e:  # a protocol error: an unknown tool, say
            return {"protocol_error": type(e).__name__, "message": str(e)}
    if op == "resources":
        return [str(r.uri) for r in (await s.list_resources()).resources]
    if op == "read":
        return (await s.read_resource(st["uri"])).contents[0].text
    if op == "rounds":
        for _ in range(st["n"]):
            for tool in ("should_run", "status", "todo_list"):
                r = await s.call_tool(tool, {})
                if r.structured_content is None:
                    return {"failed": tool}
        return {"rounds": st["n"]}
    raise ValueError(f"unknown op {op}")


async def main():
    loopx, project, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    keep = ("PATH", "HOME", "LOOPX_AGENT", "LOOPX_OWNER_KEY", "XDG_CONFIG_HOME")
    env = {k: v for k, v in os.environ.items() if k in keep}
    params = StdioServerParameters(command=loopx, args=["mcp"], cwd=project, env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            emit({"server": init.server_info.name, "tools": init.capabilities.tools is not None})
            for st in script:
                if st["op"] == "abandon":
                    # Send the request, then close the session without reading the answer.
                    asyncio.get_running_loop().create_task(s.call_tool(st["tool"], st.get("args", {})))
                    await asyncio.sleep(0.001)
                    emit({"abandoned": st["tool"]})
                    os._exit(0)
                emit(await step(s, st))


if __name__ == "__main__":
    asyncio.run(main())
