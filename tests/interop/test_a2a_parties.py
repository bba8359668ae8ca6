"""External parties beyond the demo token, with the official `a2a-sdk` over each binding: the
extended Agent Card lists only the skills a party may use and carries a valid signature, and a
party may authenticate with a JWT of a configured OpenID Connect issuer (RS256 here, keys from a
JWKS file) whose subject maps to it. Bad JWTs (expired, wrong audience or issuer, unknown subject,
foreign key) are refused like an unknown token and change nothing."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import uuid

import grpc
import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import GetExtendedAgentCardRequest, GetTaskRequest, ListTasksRequest, TaskState
from a2a.utils.signing import create_signature_verifier
from cryptography.hazmat.primitives.asymmetric import rsa

from conftest import ROOT, binary, start_server, stop_server
from test_a2a import _Metadata, send, user_message

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
ISSUER = "https://issuer.test"
AUDIENCE = "https://liaison.test"


def sdk_client(binding: str, http, token: str, card):
    config = ClientConfig(
        streaming=False,
        httpx_client=http,
        supported_protocol_bindings=[binding],
        grpc_channel_factory=lambda url: grpc.aio.insecure_channel(url, interceptors=[_Metadata(token)]),
    )
    return ClientFactory(config).create(card)


async def verifier_for(http, url):
    jwks = (await http.get(f"{url}/.well-known/jwks.json")).json()
    return create_signature_verifier(lambda kid, jku: next(jwt.PyJWK(k) for k in jwks["keys"] if k["kid"] == kid), ["ES256"])


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_extended_card_lists_the_skills_a_party_may_use(binding):
    srv, dbname = start_server("--demo")
    try:
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        # A party in no channel may use no skill.
        loner = srv.admin("POST", "/admin/v1/parties", {"id": "loner", "display_name": "Loner Inc"})["token"]["secret"]
        for token, skills in [(demo["partner"]["agent_token"], ["ask", "request-change", "chat", "handoff"]), (loner, [])]:
            headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(headers=headers, timeout=30) as http:
                card = await A2ACardResolver(http, srv.url).get_agent_card()
                assert card.capabilities.extended_agent_card
                client = sdk_client(binding, http, token, card)
                verify = await verifier_for(http, srv.url)
                extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest(), signature_verifier=verify)
                assert [s.id for s in extended.skills] == skills
                assert extended.name == card.name
                await client.close()
        # Without credentials there is no extended card.
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
            r = await http.get(f"{srv.url}/a2a/rest/extendedAgentCard")
            assert r.status_code == 401
    finally:
        stop_server(srv, dbname)


@pytest.fixture
def issuer(tmp_path, monkeypatch):
    """An RS256 issuer: its JWKS in a file, a card declaring OIDC, and the server configured for it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    public.update({"kid": "issuer-key-1", "use": "sig", "alg": "RS256"})
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [public]}))
    card_dir = tmp_path / "agent-card"
    card_dir.mkdir()
    card = (ROOT / "agent-card" / "card.toml").read_text()
    card = card.replace(
        '# openid_connect_url = "https://issuer.example/.well-known/openid-configuration"',
        f'openid_connect_url = "{ISSUER}/.well-known/openid-configuration"',
    )
    (card_dir / "card.toml").write_text(card)
    for name, value in {
        "LIAISON_A2A__CARD_DIR": str(card_dir),
        "LIAISON_A2A__JWT__ISSUER": ISSUER,
        "LIAISON_A2A__JWT__AUDIENCE": AUDIENCE,
        "LIAISON_A2A__JWT__JWKS_FILE": str(tmp_path / "jwks.json"),
    }.items():
        monkeypatch.setenv(name, value)

    def token(sub="client-42", key=key, kid="issuer-key-1", **claims):
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, **claims}
        return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})

    return token


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_party_authenticates_with_a_jwt_of_the_configured_issuer(binding, issuer):
    srv, dbname = start_server("--demo")
    try:
        srv.admin("POST", "/admin/v1/parties", {"id": "jwtco", "display_name": "JWT Co", "jwt_subject": "client-42", "issue_token": False})
        srv.admin("POST", "/admin/v1/channels/partners/members", {"add": ["jwtco"]})
        good = issuer()
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0", "Authorization": f"Bearer {good}"}, timeout=30) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            assert "oidc" in card.security_schemes
            client = sdk_client(binding, http, good, card)
            task = await send(client, user_message("Delegated with a JWT"))
            assert task.status.state == TaskState.TASK_STATE_SUBMITTED
            got = await client.get_task(GetTaskRequest(id=task.id))
            assert got.id == task.id
            await client.close()

        other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        bad = {
            "expired": issuer(exp=int(time.time()) - 3600),
            "wrong audience": issuer(aud="https://elsewhere.test"),
            "wrong issuer": issuer(iss="https://evil.test"),
            "unknown subject": issuer(sub="nobody"),
            "foreign key": issuer(key=other_key),
            "unknown kid": issuer(key=other_key, kid="nope"),
        }
        for why, token in bad.items():
            async with httpx.AsyncClient(headers={"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}, timeout=30) as http:
                client = sdk_client(binding, http, token, card)
                with pytest.raises(Exception, match="(?i)401|unauth|jwt"):
                    await client.list_tasks(ListTasksRequest())
                await client.close()

        # The refused calls created nothing: the party still has exactly its one task.
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0", "Authorization": f"Bearer {good}"}, timeout=30) as http:
            client = sdk_client(binding, http, good, card)
            listing = await client.list_tasks(ListTasksRequest())
            assert [t.id for t in listing.tasks] == [task.id]
            await client.close()
    finally:
        stop_server(srv, dbname)


def test_a_card_declaring_oidc_without_an_issuer_refuses_to_start(tmp_path, monkeypatch):
    card_dir = tmp_path / "agent-card"
    card_dir.mkdir()
    card = (ROOT / "agent-card" / "card.toml").read_text().replace(
        '# openid_connect_url = "https://issuer.example/.well-known/openid-configuration"',
        'openid_connect_url = "https://issuer.example/.well-known/openid-configuration"',
    )
    (card_dir / "card.toml").write_text(card)
    monkeypatch.setenv("LIAISON_A2A__CARD_DIR", str(card_dir))
    with pytest.raises(RuntimeError, match=r"\[a2a.jwt\] is not configured"):
        start_server()


def self_signed(tmp_path):
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "liaison test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_pem


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_with_tls_configured_every_binding_is_served_over_tls(binding, tmp_path, monkeypatch):
    cert_pem = self_signed(tmp_path)
    monkeypatch.setenv("LIAISON_TLS__CERT_FILE", str(tmp_path / "cert.pem"))
    monkeypatch.setenv("LIAISON_TLS__KEY_FILE", str(tmp_path / "key.pem"))
    srv, dbname = start_server("--demo")
    try:
        assert srv.url.startswith("https://127.0.0.1:")
        demo = json.loads((srv.data_dir / "demo.json").read_text())
        token = demo["partner"]["agent_token"]
        # Plaintext on the TLS port is refused.
        with pytest.raises(httpx.HTTPError):
            async with httpx.AsyncClient(timeout=5) as plain:
                await plain.get(srv.url.replace("https://", "http://") + "/healthz")
        # The container health check: the certificate is not trusted, unless told not to verify it.
        check = [str(binary()), "healthcheck", srv.url]
        assert subprocess.run(check, capture_output=True).returncode != 0
        assert subprocess.run([*check, "--insecure"], capture_output=True).returncode == 0
        ca = str(tmp_path / "cert.pem")
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=headers, timeout=30, verify=ssl.create_default_context(cafile=ca)) as http:
            card = await A2ACardResolver(http, srv.url).get_agent_card()
            urls = {i.protocol_binding: i.url for i in card.supported_interfaces}
            assert urls["JSONRPC"].startswith("https://") and urls["GRPC"] == srv.url.removeprefix("https://")
            (await verifier_for(http, srv.url))(card)
            config = ClientConfig(
                streaming=False,
                httpx_client=http,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=lambda url: grpc.aio.secure_channel(
                    url, grpc.ssl_channel_credentials(root_certificates=cert_pem), interceptors=[_Metadata(token)]
                ),
            )
            client = ClientFactory(config).create(card)
            task = await send(client, user_message("Over TLS"))
            assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == TaskState.TASK_STATE_SUBMITTED
            await client.close()
    finally:
        stop_server(srv, dbname)
