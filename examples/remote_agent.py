"""An example external A2A 1.0 agent, on the official Python SDK (a2a-sdk 1.3.0), to delegate to
through liaison ("Delegating to external agents" in docs/admins.md). liaison's own tests run it too.

Setup and run (from the repository root):

    python3 -m venv .venv && .venv/bin/pip install "a2a-sdk[grpc,signing,http-server]==1.3.0" uvicorn httpx
    .venv/bin/python examples/remote_agent.py --port 9100 --grpc-port 9101 --key remote-agent.pem

When ready it prints ONE JSON line on stdout, then logs to stderr:

    {"url": "http://127.0.0.1:9100", "card_url": "http://127.0.0.1:9100/.well-known/agent-card.json",
     "jwks_url": ".../.well-known/jwks.json", "jsonrpc": ".../a2a/jsonrpc", "rest": ".../a2a/rest",
     "grpc": "127.0.0.1:9101", "kid": "…", "record": null}

What it serves
- All three bindings at once: JSON-RPC at /a2a/jsonrpc and HTTP+JSON at /a2a/rest on the HTTP port,
  gRPC (lf.a2a.v1.A2AService, plaintext) on the gRPC port. Ports 0 pick free ones.
- The Agent Card at /.well-known/agent-card.json: `supportedInterfaces` (--bindings chooses which
  are listed and in which order; all three are served regardless), `capabilities.streaming` and
  `capabilities.pushNotifications` (--no-streaming / --no-push turn them off AND make the server
  refuse them, inline push configs included), skills `research`, `translate` and `summarize`.
- The card is signed (unless --unsigned): a JWS (ES256) over the RFC 8785 canonical card without
  `signatures`, detached payload, protected header {"alg":"ES256","jku":<origin>/.well-known/jwks.json,
  "kid":<RFC 7638 thumbprint of the key>,"typ":"JOSE"}. The key set is served at that `jku`. --key
  FILE loads the P-256 private key (PEM), creating it (mode 0600) if FILE does not exist; restart
  with another FILE to rotate the key. Without --key the key lives only as long as the process.
  The card carries no empty value (no `securityRequirements` with an empty scope list): a2a-sdk's
  canonicalization drops empty strings, lists and objects, the spec's keeps required ones, and a
  card without any verifies the same under both.
  For clients' failure paths: --bad-signature changes the card after signing it (the signature no
  longer verifies); --jku URL puts another key set URL in the protected header.
- /files/report.txt: the small file the `complete` behaviour links to as a URL part.

Authentication (optional)
- --token SECRET: every A2A call must carry `Authorization: Bearer SECRET` (gRPC metadata
  `authorization`); otherwise HTTP 401 / gRPC UNAUTHENTICATED. --header-check 'Name: value' does the
  same for a custom header. The card, the key set and /files stay public. The card then declares the
  matching `securitySchemes` (`bearer`, `header`).

Behaviour, by the first word of the message text (case-insensitive):
  complete   (also any other word) WORKING, then COMPLETED with four artifacts, one per part kind:
             text (echoing the message), file bytes (report.txt), file URL (/files/report.txt)
             and JSON data.
  ask        INPUT_REQUIRED with a question; the next message on that task (same taskId)
             completes it with an artifact quoting the answer.
  auth       AUTH_REQUIRED, then like `ask`.
  reject     REJECTED with a reason.
  fail       WORKING, then FAILED with a reason.
  slow       three WORKING updates ("step 1 of 3" …) about 0.5 s apart, then COMPLETED.
  wait       WORKING until canceled (CancelTask → CANCELED). A blocking SendMessage returns only
             then, so send it streaming or with returnImmediately.
  big [N]    COMPLETED with one file artifact of N MiB (default 10), to test size caps.
             Over gRPC the client must allow messages that large.
CancelTask cancels any task that has not ended. Tasks live in memory (a2a-sdk's InMemoryTaskStore).

Push notifications (unless --no-push)
- Configs given inline in SendMessage's configuration or through the push-config RPCs. Each task
  event (the Task, status and artifact updates) is POSTed to the config URL as a StreamResponse
  (JSON), with `X-A2A-Notification-Token: <token>` when the config has a token, and
  `Authorization`: the config's own `authentication` (scheme and credentials) when it has one, else
  `Bearer <JWT>` signed with the card's key (ES256, `kid` in the key set; claims `iss` = this agent's
  URL, `aud` = the push URL, `iat`, `exp` (+5 min), `jti`, `taskId`, `request_body_sha256` = hex
  SHA-256 of the exact body), the same shape liaison uses for its own pushes. --push-jwt off sends no
  JWT; --push-jwt forged signs with a throwaway key under the same `kid` (a receiver must refuse it).
  Up to three attempts per event on connection errors and 5xx. No SSRF restriction: the receiver is
  meant to be on loopback (liaison's own receiver in tests).

Testing aid: --record FILE appends one JSON line per received SendMessage / SendStreamingMessage:
  {"time", "binding" (JSONRPC | HTTP+JSON | GRPC), "taskId", "contextId", "messageId", "newTask",
   "text", "parts": [{"kind": "text"|"raw"|"url"|"data", …}], "metadata"}
plus "refused": "<error>" when the A2A handler refused the message (unknown or ended task, streaming
or push not supported, …; then "taskId" is the one the message named, or null). Calls refused
for missing credentials never reach the handler and are not recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextvars
import hashlib
import json
import logging
import os
import signal
import socket
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import grpc
import grpc.aio
import httpx
import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from a2a.server.agent_execution import AgentExecutor, RequestContext, SimpleRequestContextBuilder
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultGrpcServerCallContextBuilder, DefaultRequestHandler, GrpcHandler
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    PushNotificationSender,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    Part,
    SecurityScheme,
    Task,
    TaskState,
    TaskStatus,
    a2a_pb2_grpc,
)
from a2a.utils.errors import A2AError, PushNotificationNotSupportedError, UnsupportedOperationError
from a2a.utils.proto_utils import to_stream_response
from a2a.utils.signing import create_agent_card_signer

log = logging.getLogger("remote-agent")

BINDINGS = {"grpc": "GRPC", "jsonrpc": "JSONRPC", "http-json": "HTTP+JSON"}
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
JWKS_PATH = "/.well-known/jwks.json"
REPORT_PATH = "/files/report.txt"
REPORT_TEXT = "Quarterly report (example file served by the example remote agent).\n"
PUSH_JWT_TTL_S = 300
SLOW_STEPS = 3
SLOW_INTERVAL_S = 0.5
BIG_DEFAULT_MIB = 10
INTERRUPTED = (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)
ENDED = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
)

SKILLS = [
    AgentSkill(
        id="research",
        name="Research",
        description="Looks a question up and answers with a short report, a file and structured data.",
        tags=["research", "analysis"],
        examples=["complete Which TLS versions should a webhook endpoint accept?"],
    ),
    AgentSkill(
        id="translate",
        name="Translate",
        description="Translates a text; asks which target language when it is not given.",
        tags=["translation", "language"],
        examples=["ask Translate 'good morning'"],
    ),
    AgentSkill(
        id="summarize",
        name="Summarize",
        description="Summarizes a document step by step, reporting progress as it goes.",
        tags=["summary", "long-running"],
        examples=["slow Summarize the incident review"],
    ),
]


# ---------------------------------------------------------------------------------------------
# Keys and card signing


class Keys:
    """The agent's P-256 signing key, its RFC 7638 thumbprint (the `kid`) and its key set."""

    def __init__(self, private_key: ec.EllipticCurvePrivateKey):
        self.private_key = private_key
        self.public_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private_key.public_key()))
        members = {k: self.public_jwk[k] for k in ("crv", "kty", "x", "y")}
        digest = hashlib.sha256(json.dumps(members, sort_keys=True, separators=(",", ":")).encode()).digest()
        self.kid = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    @classmethod
    def load(cls, path: str | None) -> "Keys":
        if path is None:
            return cls(ec.generate_private_key(ec.SECP256R1()))
        file = Path(path)
        if file.exists():
            key = serialization.load_pem_private_key(file.read_bytes(), password=None)
            if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
                raise SystemExit(f"{path}: not a P-256 (ES256) private key")
            return cls(key)
        key = ec.generate_private_key(ec.SECP256R1())
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        log.info("created signing key %s", path)
        return cls(key)

    def jwks(self) -> dict:
        return {"keys": [{**self.public_jwk, "kid": self.kid, "alg": "ES256", "use": "sig"}]}

    def pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def build_card(args, base_url: str, grpc_target: str) -> AgentCard:
    urls = {"JSONRPC": base_url + JSONRPC_PATH, "HTTP+JSON": base_url + REST_PATH, "GRPC": grpc_target}
    card = AgentCard(
        name=args.name,
        description=(
            "Example external A2A agent (a2a-sdk): researches, translates and summarizes. Its behaviour "
            "is chosen by the first word of the message: complete, ask, auth, reject, fail, slow, wait, big."
        ),
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=urls[b], protocol_binding=b, protocol_version="1.0") for b in args.bindings
        ],
        capabilities=AgentCapabilities(streaming=not args.no_streaming, push_notifications=not args.no_push),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/octet-stream", "application/json"],
        skills=SKILLS,
    )
    if args.token:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="The token given to this agent's operator"
                )
            )
        )
    if args.header_check:
        name, _ = args.header_check
        card.security_schemes["header"].CopyFrom(
            SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header", name=name, description="A value agreed with this agent's operator"
                )
            )
        )
    return card


def sign_card(card: AgentCard, keys: Keys, jku: str) -> AgentCard:
    signer = create_agent_card_signer(
        signing_key=keys.pem(), protected_header={"alg": "ES256", "kid": keys.kid, "jku": jku, "typ": "JOSE"}
    )
    return signer(card)


# ---------------------------------------------------------------------------------------------
# The record of received messages (a testing aid)

_RECORDED: contextvars.ContextVar[bool] = contextvars.ContextVar("recorded", default=False)


def summarize_part(part: Part) -> dict:
    kind = part.WhichOneof("content") or "empty"
    out: dict = {"kind": kind}
    if kind == "text":
        out["chars"] = len(part.text)
    elif kind == "raw":
        out["bytes"] = len(part.raw)
    elif kind == "url":
        out["url"] = part.url
    elif kind == "data":
        out["data"] = MessageToDict(part.data)
    if part.filename:
        out["filename"] = part.filename
    if part.media_type:
        out["mediaType"] = part.media_type
    return out


class Recorder:
    def __init__(self, path: str | None):
        self.path = path

    def write(
        self, params, call_context, task_id: str | None, context_id: str | None, new_task: bool, **extra
    ) -> None:
        _RECORDED.set(True)
        if not self.path:
            return
        message = params.message
        line = {
            "time": datetime.now(timezone.utc).isoformat(),
            "binding": call_context.state.get("binding") if call_context else None,
            "taskId": task_id,
            "contextId": context_id,
            "messageId": message.message_id,
            "newTask": new_task,
            "text": "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text"),
            "parts": [summarize_part(p) for p in message.parts],
            "metadata": MessageToDict(message.metadata),
            **extra,
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


class RecordingContextBuilder(SimpleRequestContextBuilder):
    """Records each message once the handler has resolved its task (after the unknown-task and
    context checks, before the agent runs)."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    async def build(self, context, params=None, task_id=None, context_id=None, task=None) -> RequestContext:
        built = await super().build(context, params, task_id, context_id, task)
        if params is not None:
            self.recorder.write(params, context, built.task_id, built.context_id, new_task=task_id is None)
        return built


class Handler(DefaultRequestHandler):
    """a2a-sdk's handler, plus: an inline push config is refused when push is off (the SDK only
    refuses the push-config RPCs), and refused messages are recorded."""

    def __init__(self, *, push_enabled: bool, recorder: Recorder, **kwargs):
        super().__init__(request_context_builder=RecordingContextBuilder(recorder), **kwargs)
        self.push_enabled = push_enabled
        self.recorder = recorder

    async def _check(self, params, context) -> None:
        if not self.push_enabled and params.configuration.HasField("task_push_notification_config"):
            raise PushNotificationNotSupportedError(message="Push notifications are not supported by the agent")
        # The SDK refuses a message to an ended task too, but only after setting the task up
        # again (and logging the teardown of what it set up); answer the same error before that.
        if params.message.task_id:
            task = await self.task_store.get(params.message.task_id, context)
            if task is not None and task.status.state in ENDED:
                state = TaskState.Name(task.status.state)
                raise UnsupportedOperationError(message=f"Task {task.id} is in terminal state: {state}")

    def _record_refusal(self, params, context, error: A2AError) -> None:
        if not _RECORDED.get():
            task_id = params.message.task_id or None
            context_id = params.message.context_id or None
            self.recorder.write(
                params, context, task_id, context_id, new_task=task_id is None, refused=type(error).__name__
            )

    async def on_message_send(self, params, context):
        _RECORDED.set(False)
        try:
            await self._check(params, context)
            return await super().on_message_send(params, context)
        except A2AError as e:
            self._record_refusal(params, context, e)
            raise

    async def on_message_send_stream(self, params, context):
        _RECORDED.set(False)
        try:
            await self._check(params, context)
            async for event in super().on_message_send_stream(params, context):
                yield event
        except A2AError as e:
            self._record_refusal(params, context, e)
            raise


class HttpContextBuilder(DefaultServerCallContextBuilder):
    def __init__(self, binding: str):
        self.binding = binding

    def build(self, request):
        context = super().build(request)
        context.state["binding"] = self.binding
        return context


class GrpcContextBuilder(DefaultGrpcServerCallContextBuilder):
    def build(self, context):
        built = super().build(context)
        built.state["binding"] = "GRPC"
        return built


# ---------------------------------------------------------------------------------------------
# The agent


def first_word(text: str) -> tuple[str, str]:
    words = text.strip().split(None, 1)
    if not words:
        return "", ""
    return words[0].lower().strip(".,:;!?"), (words[1] if len(words) > 1 else "")


class RemoteAgentExecutor(AgentExecutor):
    def __init__(self, base_url: str):
        self.base_url = base_url

    async def execute(self, ctx: RequestContext, queue: EventQueue) -> None:
        task = ctx.current_task
        # On a follow-up that names only the task, ctx.context_id is a fresh id: use the task's.
        context_id = task.context_id if task else ctx.context_id
        up = TaskUpdater(queue, ctx.task_id, context_id)
        say = lambda text: up.new_agent_message([Part(text=text)])  # noqa: E731
        text = ctx.get_user_input()

        if task is not None and task.status.state in INTERRUPTED:
            await up.start_work(say("Thanks, finishing."))
            question = history_text(task, 0)
            await up.add_artifact([Part(text=f'You asked: "{question}". You answered: "{text}".')], name="answer")
            await up.complete(say("Done."))
            return
        if task is None:
            status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            status.timestamp.GetCurrentTime()
            await queue.enqueue_event(
                Task(id=ctx.task_id, context_id=context_id, status=status, history=[ctx.message] if ctx.message else [])
            )

        word, rest = first_word(text)
        log.info("task %s: %s", ctx.task_id, word or "(empty)")
        if word == "ask":
            await up.requires_input(say("Which environment do you mean: production or staging?"))
        elif word == "auth":
            await up.requires_auth(say("I need the report owner's permission. Reply once it is granted."))
        elif word == "reject":
            await up.reject(say("Rejected: this agent does not take requests like this one."))
        elif word == "fail":
            await up.start_work(say("Working on it."))
            await up.failed(say("Failed: the upstream data source is unavailable."))
        elif word == "slow":
            for step in range(1, SLOW_STEPS + 1):
                await up.start_work(say(f"step {step} of {SLOW_STEPS}"))
                await asyncio.sleep(SLOW_INTERVAL_S)
            await up.add_artifact([Part(text=f"Summary of: {rest or text}")], name="summary")
            await up.complete(say("Done."))
        elif word == "wait":
            await up.start_work(say("Working until canceled."))
            # CancelTask runs cancel() below, then cancels this coroutine.
            await asyncio.Event().wait()
        elif word == "big":
            mib = int(rest.split()[0]) if rest.split() and rest.split()[0].isdigit() else BIG_DEFAULT_MIB
            await up.start_work(say(f"Producing {mib} MiB."))
            blob = (b"0123456789abcdef" * 65536) * mib  # 1 MiB per repetition
            await up.add_artifact(
                [Part(raw=blob, filename="big.bin", media_type="application/octet-stream")], name="big"
            )
            await up.complete(say("Done."))
        else:
            await up.start_work(say("Working on it."))
            await up.add_artifact([Part(text=f"You said: {text}")], name="echo")
            await up.add_artifact(
                [Part(raw=f"Report for: {text}\n".encode(), filename="report.txt", media_type="text/plain")],
                name="report",
            )
            await up.add_artifact(
                [Part(url=self.base_url + REPORT_PATH, filename="report.txt", media_type="text/plain")], name="link"
            )
            data = ParseDict({"echo": text, "words": len(text.split()), "taskId": ctx.task_id}, Value())
            await up.add_artifact([Part(data=data, media_type="application/json")], name="data")
            await up.complete(say("Done."))

    async def cancel(self, ctx: RequestContext, queue: EventQueue) -> None:
        task = ctx.current_task
        context_id = task.context_id if task else ctx.context_id
        up = TaskUpdater(queue, ctx.task_id, context_id)
        await up.cancel(up.new_agent_message([Part(text="Canceled on request.")]))


def history_text(task: Task, index: int) -> str:
    if len(task.history) <= index:
        return ""
    return "\n".join(p.text for p in task.history[index].parts if p.WhichOneof("content") == "text")


# ---------------------------------------------------------------------------------------------
# Push notifications


class PushSender(PushNotificationSender):
    """POSTs each task event to every push config of the task (see the module docstring)."""

    def __init__(self, http: httpx.AsyncClient, store, keys: Keys, issuer: str, mode: str):
        self.http = http
        self.store = store
        self.keys = keys
        self.issuer = issuer
        self.mode = mode
        self.forged_key = ec.generate_private_key(ec.SECP256R1()) if mode == "forged" else None

    def push_jwt(self, audience: str, task_id: str, body: bytes) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": audience,
            "iat": now,
            "exp": now + PUSH_JWT_TTL_S,
            "jti": str(uuid.uuid4()),
            "taskId": task_id,
            "request_body_sha256": hashlib.sha256(body).hexdigest(),
        }
        key = self.forged_key or self.keys.private_key
        return jwt.encode(claims, key, algorithm="ES256", headers={"kid": self.keys.kid})

    async def send_notification(self, task_id, event) -> None:
        for config in await self.store.get_info_for_dispatch(task_id):
            await self.deliver(config, task_id, event)

    async def deliver(self, config, task_id: str, event) -> None:
        body = json.dumps(MessageToDict(to_stream_response(event)), separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json"}
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        auth = config.authentication
        if config.HasField("authentication") and auth.scheme and auth.credentials:
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        elif self.mode != "off":
            headers["Authorization"] = "Bearer " + self.push_jwt(config.url, task_id, body)
        for attempt in range(3):
            try:
                response = await self.http.post(config.url, content=body, headers=headers)
                if response.status_code < 500:
                    level = logging.INFO if response.is_success else logging.WARNING
                    log.log(level, "push %s -> %s: %s", task_id, config.url, response.status_code)
                    return
                log.warning("push %s -> %s: %s", task_id, config.url, response.status_code)
            except httpx.HTTPError as e:
                log.warning("push %s -> %s: %s", task_id, config.url, e)
            await asyncio.sleep(0.2 * 2**attempt)


# ---------------------------------------------------------------------------------------------
# Authentication on every binding


class Credentials:
    def __init__(self, token: str | None, header: tuple[str, str] | None):
        self.token = token
        self.header = header

    @property
    def required(self) -> bool:
        return bool(self.token or self.header)

    def check(self, get) -> str | None:
        """None when the call is allowed, else why not. `get(name)` reads a header (any case)."""
        if self.token and get("authorization") != f"Bearer {self.token}":
            return "A valid bearer token is required"
        if self.header and get(self.header[0].lower()) != self.header[1]:
            return f"The {self.header[0]} header is missing or wrong"
        return None


class HttpAuth:
    """ASGI middleware: 401 on /a2a/* without the credentials; the card, key set and files stay public."""

    def __init__(self, app, credentials: Credentials):
        self.app = app
        self.credentials = credentials

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.credentials.required and scope["path"].startswith("/a2a/"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            why = self.credentials.check(headers.get)
            if why:
                body = {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": why}}
                response = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
                return await response(scope, receive, send)
        return await self.app(scope, receive, send)


class GrpcAuth(grpc.aio.ServerInterceptor):
    def __init__(self, credentials: Credentials):
        self.credentials = credentials

    async def intercept_service(self, continuation, details):
        handler = await continuation(details)
        if handler is None or not self.credentials.required:
            return handler
        metadata = {m.key.lower(): m.value for m in (details.invocation_metadata or ())}
        why = self.credentials.check(metadata.get)
        if why is None:
            return handler

        async def refuse(request, context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, why)

        make = grpc.unary_stream_rpc_method_handler if handler.unary_stream else grpc.unary_unary_rpc_method_handler
        return make(
            refuse,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


# ---------------------------------------------------------------------------------------------
# Wiring


def parse_bindings(value: str) -> list[str]:
    out = []
    for name in value.split(","):
        key = name.strip().lower().replace("+", "-")
        if key not in BINDINGS:
            raise argparse.ArgumentTypeError(f"unknown binding {name!r} (use grpc, jsonrpc, http-json)")
        if BINDINGS[key] in out:
            raise argparse.ArgumentTypeError(f"binding {name!r} listed twice")
        out.append(BINDINGS[key])
    if not out:
        raise argparse.ArgumentTypeError("list at least one binding")
    return out


def parse_header(value: str) -> tuple[str, str]:
    name, sep, expected = value.partition(":")
    if not sep or not name.strip() or not expected.strip():
        raise argparse.ArgumentTypeError("expected 'Name: value'")
    return name.strip(), expected.strip()


def parse_args(argv=None):
    doc = __doc__ or ""
    behaviours = doc[doc.index("Behaviour, by") :]
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        epilog=behaviours,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="HTTP port: JSON-RPC, HTTP+JSON, card (0 = free)")
    parser.add_argument("--grpc-port", type=int, default=0, help="gRPC port (0 = free)")
    parser.add_argument("--public-host", help="host name the card advertises (default: --host, or 127.0.0.1)")
    parser.add_argument("--name", default="Research Desk", help="the agent's name on its card")
    parser.add_argument(
        "--bindings",
        type=parse_bindings,
        default=parse_bindings("grpc,jsonrpc,http-json"),
        help="interfaces the card lists, in order (default grpc,jsonrpc,http-json; all are served)",
    )
    parser.add_argument("--no-streaming", action="store_true", help="card says no streaming; streaming calls refused")
    parser.add_argument("--no-push", action="store_true", help="card says no push; push configs refused")
    parser.add_argument("--key", help="P-256 private key PEM file, created if missing (default: a fresh key)")
    parser.add_argument("--unsigned", action="store_true", help="serve the card without a signature")
    parser.add_argument(
        "--bad-signature", action="store_true", help="change the card after signing it (for clients' tests)"
    )
    parser.add_argument("--jku", help="the key set URL to name in the signature (default: our own)")
    parser.add_argument("--token", help="require 'Authorization: Bearer TOKEN' on every A2A call")
    parser.add_argument("--header-check", type=parse_header, metavar="'NAME: VALUE'", help="require this header too")
    parser.add_argument(
        "--push-jwt",
        choices=["on", "off", "forged"],
        default="on",
        help="push Authorization when the config has no credentials: a JWT by the card key (on), none (off), "
        "or signed by a throwaway key under the same kid (forged)",
    )
    parser.add_argument(
        "--record", metavar="FILE", help="testing aid: append each received message to FILE (JSON lines)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


async def serve(args) -> None:
    keys = Keys.load(args.key)
    public_host = args.public_host or ("127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host)

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    sock.setblocking(False)
    http_port = sock.getsockname()[1]
    http_host = f"[{public_host}]" if ":" in public_host else public_host
    base_url = f"http://{http_host}:{http_port}"

    credentials = Credentials(args.token, args.header_check)
    grpc_server = grpc.aio.server(
        interceptors=[GrpcAuth(credentials)],
        options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", 64 * 1024 * 1024)],
    )
    listen_host = f"[{args.host}]" if ":" in args.host else args.host
    grpc_port = grpc_server.add_insecure_port(f"{listen_host}:{args.grpc_port}")
    if grpc_port == 0:
        raise SystemExit(f"cannot listen for gRPC on {args.host}:{args.grpc_port}")
    grpc_target = f"{http_host}:{grpc_port}"

    card = build_card(args, base_url, grpc_target)
    if not args.unsigned:
        card = sign_card(card, keys, args.jku or base_url + JWKS_PATH)
        if args.bad_signature:
            card.description += " (changed after signing)"

    recorder = Recorder(args.record)
    push_http = httpx.AsyncClient(timeout=httpx.Timeout(15.0))
    push = {}
    if not args.no_push:
        store = InMemoryPushNotificationConfigStore()
        push = {
            "push_config_store": store,
            "push_sender": PushSender(push_http, store, keys, base_url, args.push_jwt),
        }
    handler = Handler(
        push_enabled=not args.no_push,
        recorder=recorder,
        agent_executor=RemoteAgentExecutor(base_url),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        **push,
    )

    async def jwks(request):
        return JSONResponse(keys.jwks(), headers={"Cache-Control": "public, max-age=60"})

    async def report(request):
        return PlainTextResponse(REPORT_TEXT)

    jsonrpc_context = HttpContextBuilder("JSONRPC")
    routes = [
        *create_agent_card_routes(agent_card=card, cache_control="public, max-age=60"),
        Route(JWKS_PATH, jwks, methods=["GET"]),
        Route(REPORT_PATH, report, methods=["GET"]),
        *create_jsonrpc_routes(request_handler=handler, rpc_url=JSONRPC_PATH, context_builder=jsonrpc_context),
        *create_jsonrpc_routes(request_handler=handler, rpc_url=JSONRPC_PATH + "/", context_builder=jsonrpc_context),
        *create_rest_routes(
            request_handler=handler, path_prefix=REST_PATH, context_builder=HttpContextBuilder("HTTP+JSON")
        ),
    ]
    app = HttpAuth(Starlette(routes=routes), credentials)
    grpc_handler = GrpcHandler(handler, context_builder=GrpcContextBuilder())
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(grpc_handler, grpc_server)

    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=2, lifespan="off")
    server = uvicorn.Server(config)
    # Our own signal handling: uvicorn's would re-raise the signal after its shutdown.
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))

    await grpc_server.start()
    http_task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if http_task.done():
            await http_task
            raise SystemExit("the HTTP server did not start")
        await asyncio.sleep(0.02)

    ready = {
        "url": base_url,
        "card_url": base_url + "/.well-known/agent-card.json",
        "jwks_url": base_url + JWKS_PATH,
        "jsonrpc": base_url + JSONRPC_PATH,
        "rest": base_url + REST_PATH,
        "grpc": grpc_target,
        "kid": keys.kid,
        "record": args.record,
    }
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()
    signed = "unsigned" if args.unsigned else f"signed by {keys.kid}"
    log.info("serving %s (gRPC %s), card %s", base_url, grpc_target, signed)
    try:
        await http_task
    finally:
        await grpc_server.stop(0.5)
        try:
            await asyncio.wait_for(handler.aclose(), timeout=2)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - shutting down anyway
            pass
        await push_http.aclose()


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    for noisy in ("httpx", "a2a", "uvicorn.error", "sse_starlette"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
