"""A scripted model on 127.0.0.1 for the host tests: it speaks the Anthropic Messages API
(Claude Code) and the OpenAI Responses API (Codex CLI), both streamed, and answers each request
with the next step of a script instead of thinking.

    python3 model.py SCRIPT.json LOGDIR

SCRIPT.json is a list of steps. A step is {"tool": NAME, "args": {...}} (a call of the loopx
MCP tool NAME) or {"text": "..."} (the final answer). The step a request gets is the number of
tool results in its conversation, so a host that retries or sends side requests (titles, quota
probes: requests without tools) never skips one. In args, the strings "$turn", "$todo" and
"$fence" are replaced by the values the loopx answers so far carried (`turn`, `todo.id`,
`fence`), which is how a script claims a todo and then ends the turn it got.

It prints its port on the first line of stdout once it listens. It writes LOGDIR/requests.jsonl
(one line a request: its path and the tool results it carried) and LOGDIR/tools.json (the
tools of the first request that had any: name as the host shows it, and its input schema).
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = json.load(open(sys.argv[1]))
LOGDIR = sys.argv[2]
LOCK = threading.Lock()
PREFIX = "mcp__loopx__"  # how both hosts name loopx's tools to the model


def answers(value):
    """The loopx answers (objects with `ok`) inside a tool result, however the host wrapped it:
    text blocks, JSON in strings after a preamble, structured content."""
    if isinstance(value, str):  # Codex puts "Wall time: ...\nOutput:\n" before the JSON
        try:
            value = json.JSONDecoder().raw_decode(value[value.index("{"):])[0]
        except ValueError:
            return
    if isinstance(value, dict):
        if "ok" in value:
            yield value
            return
        for v in value.values():
            yield from answers(v)
    elif isinstance(value, list):
        for v in value:
            yield from answers(v)


def results(body):
    """The tool results of a request's conversation, oldest first (both APIs)."""
    out = []
    for m in body.get("messages", []):  # Anthropic: tool_result blocks in user messages
        if isinstance(m.get("content"), list):
            out += [b.get("content") for b in m["content"] if b.get("type") == "tool_result"]
    for item in body.get("input", []) if isinstance(body.get("input"), list) else []:
        if item.get("type") == "function_call_output":  # OpenAI Responses
            out.append(item.get("output"))
    return out


def fill(args, seen):
    """args with "$turn", "$todo" and "$fence" replaced by what the answers so far said."""
    vals = {}
    for r in seen:
        for a in answers(r):
            if "turn" in a:
                vals["$turn"] = a["turn"]
            if "fence" in a:
                vals["$fence"] = a["fence"]
            if isinstance(a.get("todo"), dict) and "id" in a["todo"]:
                vals["$todo"] = a["todo"]["id"]
    def sub(v):
        if isinstance(v, str) and v in vals:
            return vals[v]
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v
    return {k: sub(v) for k, v in args.items()}


def tool_schemas(body):
    """{name: schema} of a request's tools: Anthropic's, and OpenAI's flat or namespaced ones."""
    out = {}
    for t in body.get("tools", []):
        if t.get("type") == "namespace":
            for f in t.get("tools", []):
                out[t["name"] + "__" + f["name"]] = f.get("parameters")
        else:
            out[t.get("name", t.get("type"))] = t.get("input_schema", t.get("parameters"))
    return out


def step_for(body):
    """The script's step for this request, with its args filled in; text when it has no tools."""
    seen = results(body)
    if not body.get("tools"):
        return {"text": "loopx scripted model"}
    step = SCRIPT[min(len(seen), len(SCRIPT) - 1)]
    if "tool" in step:
        return {"tool": step["tool"], "args": fill(step.get("args", {}), seen)}
    return step


def log(body, path):
    with LOCK:
        with open(os.path.join(LOGDIR, "requests.jsonl"), "a") as f:
            f.write(json.dumps({"path": path, "results": results(body)}) + "\n")
        tools = tool_schemas(body)
        where = os.path.join(LOGDIR, "tools.json")
        if tools and not os.path.exists(where):
            with open(where, "w") as f:
                json.dump(tools, f, indent=2, sort_keys=True)


def anthropic_events(step, n):
    """The SSE events of one streamed Messages answer."""
    msg = {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "scripted",
           "content": [], "stop_reason": None, "stop_sequence": None,
           "usage": {"input_tokens": 1, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": msg}
    if "tool" in step:
        block = {"type": "tool_use", "id": f"toolu_{n}", "name": PREFIX + step["tool"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step["args"])}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": step["text"]}
        stop = "end_turn"
    yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 1}}
    yield "message_stop", {"type": "message_stop"}


def openai_events(step, n):
    """The SSE events of one streamed Responses answer: Codex groups MCP tools in a namespace."""
    yield "response.created", {"type": "response.created", "response": {"id": f"resp_{n}"}}
    if "tool" in step:
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                "namespace": PREFIX.rstrip("_"), "name": step["tool"],
                "arguments": json.dumps(step["args"])}
    else:
        item = {"type": "message", "id": f"msg_{n}", "role": "assistant",
                "content": [{"type": "output_text", "text": step["text"]}]}
    yield "response.output_item.done", {"type": "response.output_item.done",
                                        "output_index": 0, "item": item}
    usage = {"input_tokens": 1, "input_tokens_details": None, "output_tokens": 1,
             "output_tokens_details": None, "total_tokens": 2}
    yield "response.completed", {"type": "response.completed",
                                 "response": {"id": f"resp_{n}", "usage": usage}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0

    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", kind="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):
        self.reply(200)

    def do_GET(self):
        self.reply(404, b'{"error":"not scripted"}')

    def do_POST(self):
        size = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(size) or b"{}")
        path = self.path.split("?")[0]
        log(body, path)
        with LOCK:
            Handler.count += 1
            n = Handler.count
        if path.endswith("/v1/messages"):
            events = anthropic_events(step_for(body), n)
        elif path.endswith("/responses"):
            events = openai_events(step_for(body), n)
        else:
            return self.reply(404, b'{"error":"not scripted"}')
        data = b"".join(
            f"event: {name}\ndata: {json.dumps(ev)}\n\n".encode() for name, ev in events)
        self.reply(200, data, "text/event-stream")


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
