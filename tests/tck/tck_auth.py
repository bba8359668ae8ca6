"""A pytest plugin that gives the A2A conformance kit a credential.

The TCK (1.0-dev) sends no `Authorization` at all, and liaison serves no anonymous caller (every
task belongs to an authenticated party). Rather than patching the kit, this plugin, loaded into
the kit's pytest run with `-p tck_auth` (this folder on PYTHONPATH), adds
`Authorization: Bearer $A2A_TCK_TOKEN` to every HTTP request the kit makes through httpx and to
the metadata of every gRPC call on the channels it opens. A request that already carries an
`Authorization` is left as it is.

With `A2A_TCK_UNIQUE_IDS=1` it also makes every `tck_id(...)` call unique (a random suffix after the
kit's own id, so the messageId prefixes the scenario agent reads are kept). The kit reuses one
messageId per scenario name for a whole session, which liaison's deduplication by messageId answers
as retries or refuses as conflicts (docs/conformance.md); this mode measures everything else.
"""

from __future__ import annotations

import os
import uuid

import grpc
import httpx

TOKEN = os.environ.get("A2A_TCK_TOKEN", "")


def _with_auth(request: httpx.Request) -> None:
    if TOKEN and "authorization" not in request.headers:
        request.headers["Authorization"] = f"Bearer {TOKEN}"


class _Metadata(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
):
    def _details(self, details):
        metadata = list(details.metadata or ())
        if TOKEN and not any(k == "authorization" for k, _ in metadata):
            metadata.append(("authorization", f"Bearer {TOKEN}"))
        return details._replace(metadata=metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)


def pytest_configure(config) -> None:
    if not TOKEN:
        raise RuntimeError("set A2A_TCK_TOKEN to the party token the kit should call with")
    send, asend = httpx.Client.send, httpx.AsyncClient.send

    def client_send(self, request, *args, **kwargs):
        _with_auth(request)
        return send(self, request, *args, **kwargs)

    async def async_send(self, request, *args, **kwargs):
        _with_auth(request)
        return await asend(self, request, *args, **kwargs)

    if os.environ.get("A2A_TCK_UNIQUE_IDS") == "1":
        import tck.requirements.base as base

        kit_id = base.tck_id
        base.tck_id = lambda name: f"{kit_id(name)}-{uuid.uuid4().hex[:8]}"
    httpx.Client.send = client_send
    httpx.AsyncClient.send = async_send
    insecure_channel = grpc.insecure_channel
    grpc.insecure_channel = lambda target, *a, **kw: grpc.intercept_channel(
        insecure_channel(target, *a, **kw), _Metadata()
    )
