"""An MCP client for tests/it/mcp.rs: the official MCP Python SDK (`mcp` on PyPI) driving apijet.

Reads a plan as JSON on stdin:

    {"http": URL, "token": TOKEN or null}          Streamable HTTP (token: Authorization: Bearer;
                                                   with "as_cookie": true the login cookie)
    {"stdio": {"command": BIN, "args": [...], "env": {...}}}   apijet mcp as a child process
    plus "steps": [
        {"op": "list_tools"},
        {"op": "call", "tool": NAME, "arguments": {...}},
        {"op": "list_resources"}, {"op": "read_resource", "uri": URI},
        {"op": "list_prompts"}, {"op": "get_prompt", "name": NAME, "arguments": {...}}
    ]

and prints one JSON object: the negotiated protocol version, the server's name, and one result
per step (what the SDK parsed: tool names, isError and text contents, resource and prompt
texts, or the error the SDK raised). The assertions are the Rust test's.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def step(client, s):
    op = s["op"]
    if op == "list_tools":
        tools = await client.list_tools()
        return {"tools": [t.name for t in tools.tools]}
    if op == "call":
        r = await client.call_tool(s["tool"], s.get("arguments") or {})
        texts = [c.text for c in r.content if getattr(c, "type", None) == "text"]
        return {"is_error": bool(r.is_error), "texts": texts}
    if op == "list_resources":
        r = await client.list_resources()
        return {"resources": [str(x.uri) for x in r.resources]}
    if op == "read_resource":
        r = await client.read_resource(s["uri"])
        return {"texts": [c.text for c in r.contents if hasattr(c, "text")]}
    if op == "list_prompts":
        r = await client.list_prompts()
        return {"prompts": [p.name for p in r.prompts]}
    if op == "get_prompt":
        r = await client.get_prompt(s["name"], s.get("arguments") or {})
        return {"texts": [m.content.text for m in r.messages if hasattr(m.content, "text")]}
    raise ValueError(f"unknown op {op}")


async def run(plan):
    if "http" in plan:
        headers = {}
        if plan.get("token") and plan.get("as_cookie"):
            headers["Cookie"] = f"apijet_token={plan['token']}"
        elif plan.get("token"):
            headers["Authorization"] = f"Bearer {plan['token']}"
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
        from mcp.client.streamable_http import streamable_http_client

        server = streamable_http_client(plan["http"], http_client=http)
    else:
        s = plan["stdio"]
        server = StdioServerParameters(command=s["command"], args=s["args"], env=s.get("env"))
    out = {"results": []}
    async with Client(server, read_timeout_seconds=60) as client:
        out["protocol"] = client.protocol_version
        info = client.server_info
        out["server"] = info.name if info else None
        for s in plan["steps"]:
            try:
                out["results"].append(await step(client, s))
            except Exception as e:  # the SDK's own refusal of a step is a result too
                out["results"].append({"error": f"{type(e).__name__}: {e}"})
    return out


def main():
    plan = json.load(sys.stdin)
    print(json.dumps(asyncio.run(run(plan))))


if __name__ == "__main__":
    main()
