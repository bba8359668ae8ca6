-- Remote A2A agents (SPEC §8b): external agents that internal agents delegate to. Each is a person
-- of kind `remote` (its id is the name agents address), registered by an admin from its Agent
-- Card URL. The card is kept as fetched and verified; its signing keys are pinned at registration
-- (a refresh that finds other keys needs an admin's explicit acceptance); the credentials liaison
-- presents to it are sealed under the master key. Booleans are 0/1.
CREATE TABLE remotes (
    person_id            TEXT PRIMARY KEY REFERENCES persons (id),
    card_url             TEXT NOT NULL,
    -- The Agent Card JSON exactly as fetched (and verified, unless registered unsigned).
    card                 TEXT NOT NULL,
    -- The pinned signing keys: a JWKS (`{"keys": []}` for an unsigned card).
    jwks                 TEXT NOT NULL,
    unsigned             BIGINT NOT NULL,
    -- The interface calls go to: its binding (GRPC, JSONRPC or HTTP+JSON), URL and tenant.
    binding              TEXT NOT NULL,
    -- 1 when an admin chose the binding (a refresh keeps it) rather than the preference order.
    binding_forced       BIGINT NOT NULL,
    url                  TEXT NOT NULL,
    tenant               TEXT,
    -- The card's capabilities.streaming and capabilities.pushNotifications.
    streaming            BIGINT NOT NULL,
    push                 BIGINT NOT NULL,
    -- Bearer token, OAuth2 client credentials and extra headers, sealed; NULL when none.
    sealed_credentials   TEXT,
    -- What the credentials are, without any secret (JSON), for list and show.
    credentials_summary  TEXT NOT NULL,
    created_at           BIGINT NOT NULL,
    refreshed_at         BIGINT NOT NULL,
    removed_at           BIGINT
);
