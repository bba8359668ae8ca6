"""Key rotation as an a2a-sdk client sees it: the SDK's signature verifier accepts the card before
`liaison keys rotate`, during the overlap (two signatures, both keys in the JWKS) and after
`keys retire` of the old key; the card the retired key alone signed no longer verifies."""

from __future__ import annotations

import json
import os
import subprocess

import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver
from a2a.utils.signing import create_signature_verifier

from conftest import binary, start_server, stop_server

pytestmark = pytest.mark.anyio


def cli(srv, *args: str) -> dict:
    env = {**os.environ, "LIAISON_ADMIN_TOKEN": srv.admin_token}
    r = subprocess.run([str(binary()), *args, "--server", srv.url], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


async def fetch(http, url):
    card = await A2ACardResolver(http, url).get_agent_card()
    jwks = (await http.get(f"{url}/.well-known/jwks.json")).json()
    return card, jwks


def verifier(url, jwks):
    def key_provider(kid, jku):
        assert jku == f"{url}/.well-known/jwks.json"
        for k in jwks["keys"]:
            if k["kid"] == kid:
                return jwt.PyJWK(k)
        raise jwt.PyJWKError(f"no key {kid} in this key set")  # the SDK tries the next signature

    return create_signature_verifier(key_provider, ["ES256"])


def kids(card) -> list[str]:
    return [jwt.get_unverified_header(f"{s.protected}..")["kid"] for s in card.signatures]


async def test_the_sdk_verifies_the_card_through_a_rotation():
    srv, dbname = start_server()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            before, jwks = await fetch(http, srv.url)
            verifier(srv.url, jwks)(before)
            [old] = kids(before)

            rotated = cli(srv, "keys", "rotate")
            new = rotated["rotated_to"]["kid"]
            during, jwks = await fetch(http, srv.url)
            assert sorted(kids(during)) == sorted([old, new])
            assert {k["kid"] for k in jwks["keys"]} == {old, new}
            verifier(srv.url, jwks)(during)
            # A client still holding only the old key set verifies the new card too.
            old_only = {"keys": [k for k in jwks["keys"] if k["kid"] == old]}
            verifier(srv.url, old_only)(during)
            listed = cli(srv, "keys", "list", "--json")["keys"]
            assert [k["kid"] for k in listed] == [new, old] and listed[0]["signing"]

            cli(srv, "keys", "retire", old)
            after, jwks = await fetch(http, srv.url)
            assert kids(after) == [new] and [k["kid"] for k in jwks["keys"]] == [new]
            verifier(srv.url, jwks)(after)
            with pytest.raises(Exception):
                verifier(srv.url, jwks)(before)
    finally:
        stop_server(srv, dbname)
