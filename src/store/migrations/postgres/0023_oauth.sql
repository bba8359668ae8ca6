-- OAuth 2.1 for MCP clients (SPEC §7): the clients, the grants (each one a connection: a row of
-- `tokens` whose secret is never shown), the authorization codes and the refresh tokens. Codes
-- and refresh tokens are stored as SHA-256 hashes; access tokens are not stored (they are
-- MACed by the master key and checked against their grant on every request).

-- A client: registered (RFC 7591; `id` is `ocl_…`) or known by its metadata document (`id` is
-- the document's https URL, refreshed from it). `metadata` is the registration as answered.
CREATE TABLE oauth_clients (
    id             TEXT PRIMARY KEY,
    kind           TEXT NOT NULL,
    name           TEXT NOT NULL,
    redirect_uris  TEXT NOT NULL,
    metadata       TEXT NOT NULL,
    registered_from TEXT,
    created_at     BIGINT NOT NULL,
    fetched_at     BIGINT NOT NULL
);
CREATE INDEX oauth_clients_created ON oauth_clients (kind, created_at);

-- A grant: the connection (token id) a member consented to, for a client and a resource.
CREATE TABLE oauth_grants (
    token_id   TEXT PRIMARY KEY REFERENCES tokens (id),
    client_id  TEXT NOT NULL,
    resource   TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX oauth_grants_client ON oauth_grants (client_id);

-- An authorization code: single use (`used_at`), bound to its grant, redirect URI and PKCE
-- challenge (S256).
CREATE TABLE oauth_codes (
    code_hash      TEXT PRIMARY KEY,
    token_id       TEXT NOT NULL REFERENCES tokens (id),
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at     BIGINT NOT NULL,
    used_at        BIGINT
);
CREATE INDEX oauth_codes_token ON oauth_codes (token_id);

-- A refresh token of a grant (its family): rotated on use (`used_at`); presenting a used one
-- again is reuse, and revokes the grant.
CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    token_id   TEXT NOT NULL REFERENCES tokens (id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX oauth_refresh_tokens_token ON oauth_refresh_tokens (token_id);
