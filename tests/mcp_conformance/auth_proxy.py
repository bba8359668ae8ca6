"""A pass-through proxy that adds a bearer token: the official MCP conformance suite
(`@modelcontextprotocol/conformance`) has no option to send headers, and liaison serves no
anonymous MCP client. Every request to this proxy is forwarded to `--upstream` as it came (method,
path, query, body, headers, Host and Origin included, so DNS-rebinding checks still see the
client's), with `Authorization: Bearer <token>` and `Liaison-Agent` added; responses, SSE streams
included, are streamed back unchanged.

    python auth_proxy.py --upstream http://127.0.0.1:8080 --token lsn_… --port 9960
"""

from __future__ import annotations

import argparse

import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import StreamingResponse

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length"}


def app_for(upstream: str, token: str):
    client = httpx.AsyncClient(base_url=upstream, timeout=httpx.Timeout(None))

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["authorization"] = f"Bearer {token}"
        headers["liaison-agent"] = "mcp-conformance@localhost:1"
        url = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        upstream_request = client.build_request(request.method, url, headers=headers, content=await request.body())
        response = await client.send(upstream_request, stream=True)
        out = {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}
        await StreamingResponse(response.aiter_raw(), status_code=response.status_code, headers=out,
                                background=None)(scope, receive, send)
        await response.aclose()

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--port", type=int, default=9960)
    args = parser.parse_args()
    uvicorn.run(app_for(args.upstream.rstrip("/"), args.token), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
