"""Delegate a task to liaison's team over A2A with the official Python SDK (`pip install "a2a-sdk[grpc,signing]" httpx`).

    python examples/a2a_delegate.py --url http://127.0.0.1:8080 --token lsn_… "Which TLS versions do you accept?"
    python examples/a2a_delegate.py --demo liaison-data/demo.json --binding GRPC --answer Production "…"

It resolves the Agent Card, verifies the card's signature against the server's JWKS, sends the
message over the chosen binding (JSONRPC, HTTP+JSON or GRPC) with streaming, and prints the task's
states as the team's agents work on it. When the team asks a question (INPUT_REQUIRED), it answers
with --answer, or asks you on the terminal, in the same task. It ends when the task ends, printing
the artifacts, and exits 0 only if the task COMPLETED.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import uuid

import grpc
import httpx
import jwt
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.signing import create_signature_verifier
from google.protobuf.json_format import MessageToDict

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
ENDED = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_CANCELED}


class BearerMetadata(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds the token and A2A-Version to unary gRPC calls (streams get the token through the
    SDK's ClientCallContext)."""

    def __init__(self, token: str):
        self.extra = (("authorization", f"Bearer {token}"), ("a2a-version", "1.0"))

    async def intercept_unary_unary(self, continuation, details, request):
        metadata = tuple(details.metadata or ()) + self.extra
        return await continuation(details._replace(metadata=metadata), request)


async def verified_card(http: httpx.AsyncClient, url: str):
    """The Agent Card, after checking its JWS signature against the keys the card names (`jku`)."""
    card = await A2ACardResolver(http, url).get_agent_card()
    jwks_cache: dict[str, dict] = {}

    def key_provider(kid: str, jku: str):
        if not jku.startswith(url.rstrip("/") + "/"):
            raise ValueError(f"the card's key set {jku} is not served by {url}")
        return next(jwt.PyJWK(k) for k in jwks_cache[jku]["keys"] if k["kid"] == kid)

    for signature in card.signatures:
        header = json.loads(base64.urlsafe_b64decode(signature.protected + "=" * (-len(signature.protected) % 4)))
        jwks_cache.setdefault(header["jku"], (await http.get(header["jku"])).json())
    create_signature_verifier(key_provider, ["ES256"])(card)
    return card


def describe(part: Part) -> str:
    kind = part.WhichOneof("content")
    if kind == "text":
        return part.text
    if kind == "raw":
        return f"[file {part.filename or '(unnamed)'} {part.media_type}, {len(part.raw)} bytes]"
    if kind == "url":
        return f"[link {part.url}]"
    if kind == "data":
        return "[data " + json.dumps(MessageToDict(part.data), sort_keys=True) + "]"
    return f"[{kind}]"


async def delegate(args) -> int:
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {args.token}"}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=None)) as http:
        card = await verified_card(http, args.url)
        print(f"card: {card.name} {card.version} (signature verified), skills: {', '.join(s.id for s in card.skills)}")
        config = ClientConfig(
            streaming=True,
            httpx_client=http,
            supported_protocol_bindings=[args.binding],
            grpc_channel_factory=lambda target: grpc.aio.insecure_channel(target, interceptors=[BearerMetadata(args.token)]),
        )
        client = ClientFactory(config).create(card)
        context = ClientCallContext(service_parameters={"authorization": f"Bearer {args.token}"})
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=args.text)])
        if args.skill:
            message.metadata.update({"skill": args.skill})
        state, task_id, context_id, artifacts = None, None, None, []
        try:
            while True:
                async for event in client.send_message(SendMessageRequest(message=message), context=context):
                    kind = event.WhichOneof("payload")
                    if kind == "task":
                        task_id, context_id, state = event.task.id, event.task.context_id, event.task.status.state
                        print(f"task {task_id}: {TaskState.Name(state)}")
                    elif kind == "status_update":
                        state = event.status_update.status.state
                        said = " ".join(describe(p) for p in event.status_update.status.message.parts)
                        print(f"  {TaskState.Name(state)}" + (f": {said}" if said else ""))
                    elif kind == "artifact_update":
                        artifacts.append(event.artifact_update.artifact)
                        for part in event.artifact_update.artifact.parts:
                            print(f"  artifact: {describe(part)}")
                if state != TaskState.TASK_STATE_INPUT_REQUIRED:
                    break
                answer = args.answer if args.answer is not None else input("the team asks; your answer: ")
                message = Message(
                    message_id=str(uuid.uuid4()), role=Role.ROLE_USER, task_id=task_id, context_id=context_id, parts=[Part(text=answer)]
                )
        finally:
            await client.close()
        if state not in ENDED:
            print(f"the stream ended with the task {TaskState.Name(state) if state is not None else 'unknown'}")
        return 0 if state == TaskState.TASK_STATE_COMPLETED else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("text", help="what to ask or request")
    p.add_argument("--url", default="http://127.0.0.1:8080", help="liaison's public URL")
    p.add_argument("--token", help="the party's bearer token (liaison party add …)")
    p.add_argument("--demo", help="read --token (the partner's) and --url from the demo.json of `serve --demo`")
    p.add_argument("--binding", choices=BINDINGS, default="JSONRPC")
    p.add_argument("--skill", help="a skill id of the card (default: the party's or the card's default)")
    p.add_argument("--answer", help="the answer to give if the team asks a question (default: ask on the terminal)")
    args = p.parse_args()
    if args.demo:
        with open(args.demo) as f:
            demo = json.load(f)
        args.token = args.token or demo["partner"]["agent_token"]
        args.url = demo.get("url", args.url)
    if not args.token:
        p.error("--token (or --demo) is required")
    return asyncio.run(delegate(args))


if __name__ == "__main__":
    sys.exit(main())
