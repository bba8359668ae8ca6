//! OAuth 2.1 for MCP clients (SPEC §7), part two: authorization requests, the member's consent,
//! and the tokens of a grant.
//!
//! - **A grant is a connection.** Consenting writes a `tokens` row (scope `agent`, the name and
//!   rights she chose, no usable secret) with its grant and first code, in one transaction. So a
//!   grant is listed on Connect, addressed as `alice/claude-laptop`, holds its own cursors and
//!   claims, and revoking it there ends its sessions and long-polls at once on every replica,
//!   exactly as for a pasted token. It lives [`super::OAuthSettings::grant_ttl_days`].
//! - **Codes** are single use (a second use revokes the grant, RFC 6749 §4.1.2), short-lived,
//!   bound to their grant, client, redirect URI and S256 challenge (PKCE is required; `plain` is
//!   refused).
//! - **Access tokens** are `lsa_<grant>.<expiry>.<mac>`: an HMAC-SHA-256 under a key derived from
//!   the master key and the resource (liaison's `/mcp` URL), so a token is bound to that audience
//!   and nothing is stored per token. Every request checks the grant (revoked, expired) from the
//!   database, so revocation is immediate although the token is self-contained. They last
//!   `access_token_ttl_s` (15 minutes by default). An access token authenticates wherever an
//!   agent token does (MCP and the agent endpoints of `/api/v1`).
//! - **Refresh tokens** are opaque (`lsr_…`), stored hashed, rotated on every use; presenting a
//!   spent one again revokes the whole grant (reuse detection), and is audited.
//! - **Revocation** (RFC 7009) of either token revokes the grant.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::auth::{ACCESS_PREFIX, hash_secret, new_secret};
use super::connections::{name_taken, own};
use super::oauth::server_error;
use super::own_tokens::usable;
use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::oauth::{
    OAuthError, OAuthErrorCode, redirect_matches, valid_challenge, verifier_matches, with_query,
};
use crate::domain::{ConnectionRights, ConnectionSlug, PersonKind, Scope, Scopes, Timestamp};
use crate::store::{
    AdminChange, CodeUse, OAuthClientRecord, OAuthCodeRecord, OAuthGrantRecord, Rotation,
    TokenRecord,
};

/// Every refresh token starts with this.
const REFRESH_PREFIX: &str = "lsr_";
/// Every authorization code starts with this.
const CODE_PREFIX: &str = "lsc_";
/// Longest `state` a client may send, in bytes.
const MAX_STATE_BYTES: usize = 1_000;

/// An authorization request's parameters (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2), as
/// sent; the console's consent form carries them back unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct AuthorizeParams {
    #[serde(default)]
    pub response_type: Option<String>,
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub redirect_uri: Option<String>,
    #[serde(default)]
    pub code_challenge: Option<String>,
    #[serde(default)]
    pub code_challenge_method: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub resource: Option<String>,
}

/// A checked authorization request: what the consent page shows.
#[derive(Debug, Clone)]
pub struct AuthorizationRequest {
    /// The client: its name and redirect URIs are self-declared.
    pub client: OAuthClientRecord,
    /// Where the member is sent back (one the client registered).
    pub redirect_uri: String,
    pub challenge: String,
    pub state: Option<String>,
    pub resource: String,
}

/// Why an authorization request is refused: shown to the member (the client or its redirect URI
/// cannot be trusted, RFC 6749 §4.1.2.1), or sent back to the client's redirect URI.
#[derive(Debug, Clone)]
pub enum AuthorizeRefusal {
    Shown(OAuthError),
    Redirect(String),
}

/// What the member decided on the consent page.
#[derive(Debug, Clone)]
pub enum Consent {
    Allow {
        /// The connection's name; none derives it from the client's name.
        connection: Option<ConnectionSlug>,
        rights: ConnectionRights,
    },
    Deny,
}

/// Why a consent was not recorded.
#[derive(Debug, Clone)]
pub enum ConsentError {
    /// The request itself is refused (as at the authorization endpoint).
    Request(AuthorizeRefusal),
    /// Her choice cannot be recorded (a taken name, too many connections, …): the page again.
    Choice(ServiceError),
}

/// The token endpoint's form (RFC 6749 §4.1.3 and §6).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TokenParams {
    #[serde(default)]
    pub grant_type: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub redirect_uri: Option<String>,
    #[serde(default)]
    pub code_verifier: Option<String>,
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
}

fn random_secret(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(crate::domain::secret::random::<32>())
    )
}

type OAuthResult<T> = std::result::Result<T, OAuthError>;

impl Service {
    /// Checks an authorization request: the client and its redirect URI first (refused on a
    /// page), then the rest (refused to the redirect URI): response type `code`, an S256 PKCE
    /// challenge, scope `agent` (or none), and liaison's MCP URL as the resource (or none).
    pub async fn oauth_authorization(
        &self,
        p: &AuthorizeParams,
    ) -> std::result::Result<AuthorizationRequest, AuthorizeRefusal> {
        self.oauth_on().map_err(AuthorizeRefusal::Shown)?;
        let client_id = p
            .client_id
            .as_deref()
            .ok_or_else(|| AuthorizeRefusal::Shown(OAuthError::request("client_id is required")))?;
        let client = self
            .oauth_client(client_id)
            .await
            .map_err(AuthorizeRefusal::Shown)?;
        let redirect_uri = match p.redirect_uri.as_deref() {
            Some(uri) => client
                .redirect_uris
                .iter()
                .any(|r| redirect_matches(r, uri))
                .then(|| uri.to_owned())
                .ok_or_else(|| {
                    AuthorizeRefusal::Shown(OAuthError::request(format!(
                        "redirect_uri {uri:?} is not one this client registered"
                    )))
                })?,
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => {
                return Err(AuthorizeRefusal::Shown(OAuthError::request(
                    "redirect_uri is required: the client registered several",
                )));
            }
        };
        let state = p.state.clone();
        let issuer = self.oauth_settings().issuer.clone();
        let back = |code: OAuthErrorCode, why: &str| {
            let mut params = vec![("error", code.as_str()), ("error_description", why)];
            if let Some(s) = &state {
                params.push(("state", s));
            }
            params.push(("iss", &issuer));
            AuthorizeRefusal::Redirect(with_query(&redirect_uri, &params))
        };
        if state.as_ref().is_some_and(|s| s.len() > MAX_STATE_BYTES) {
            return Err(AuthorizeRefusal::Shown(OAuthError::request(format!(
                "state is longer than {MAX_STATE_BYTES} bytes"
            ))));
        }
        if p.response_type.as_deref() != Some("code") {
            return Err(back(
                OAuthErrorCode::UnsupportedResponseType,
                "response_type must be code",
            ));
        }
        let Some(challenge) = p.code_challenge.as_deref() else {
            return Err(back(
                OAuthErrorCode::InvalidRequest,
                "PKCE is required: send code_challenge with code_challenge_method=S256",
            ));
        };
        if p.code_challenge_method.as_deref() != Some("S256") {
            return Err(back(
                OAuthErrorCode::InvalidRequest,
                "code_challenge_method must be S256 (plain is not accepted)",
            ));
        }
        if !valid_challenge(challenge) {
            return Err(back(
                OAuthErrorCode::InvalidRequest,
                "code_challenge is not an S256 challenge (43 base64url characters)",
            ));
        }
        if p.scope
            .as_deref()
            .is_some_and(|s| s.split(' ').any(|s| !s.is_empty() && s != "agent"))
        {
            return Err(back(
                OAuthErrorCode::InvalidScope,
                "the only scope is agent",
            ));
        }
        let resource = self.oauth_settings().resource.clone();
        if p.resource.as_deref().is_some_and(|r| r != resource) {
            return Err(back(
                OAuthErrorCode::InvalidTarget,
                "this server issues tokens for its own MCP endpoint only",
            ));
        }
        Ok(AuthorizationRequest {
            client,
            redirect_uri,
            challenge: challenge.to_owned(),
            state,
            resource,
        })
    }

    /// The MAC binding a consent form to the request it showed and to the session showing it
    /// (`csrf` is the session's CSRF token): changing any parameter voids the form.
    pub fn oauth_binding(&self, csrf: &str, p: &AuthorizeParams) -> Result<String> {
        let key = self.oauth_key("oauth consent")?;
        let message = serde_json::to_vec(&(csrf, p))
            .map_err(|e| ServiceError::new(ErrorCode::Internal, e.to_string()))?;
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(ring::hmac::sign(&key, &message).as_ref()))
    }

    fn oauth_key(&self, purpose: &str) -> Result<ring::hmac::Key> {
        let master = self.inner.master_key.as_ref().ok_or_else(|| {
            ServiceError::new(ErrorCode::Internal, "no master key: OAuth cannot run")
        })?;
        let resource = &self.oauth_settings().resource;
        Ok(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            &master.derive(purpose, resource.as_bytes()),
        ))
    }

    /// Records the member's decision on a request she saw (the console checked the form's
    /// binding): allowed, a grant (her new connection, named and with the rights she chose) and
    /// a code, sent back to the client; denied, `access_denied`. Audited as `oauth.granted`.
    pub async fn oauth_consent(
        &self,
        caller: &Caller,
        p: &AuthorizeParams,
        consent: Consent,
    ) -> std::result::Result<String, ConsentError> {
        own(caller).map_err(ConsentError::Choice)?;
        let request = self
            .oauth_authorization(p)
            .await
            .map_err(ConsentError::Request)?;
        // Every authorization response names its issuer (RFC 9207), so a client talking to
        // several servers can tell which one answered (mix-up attacks).
        let with_state = |mut params: Vec<(&'static str, String)>| {
            if let Some(s) = &request.state {
                params.push(("state", s.clone()));
            }
            params.push(("iss", self.oauth_settings().issuer.clone()));
            let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
            with_query(&request.redirect_uri, &params)
        };
        let (connection, rights) = match consent {
            Consent::Deny => {
                tracing::info!(person = %caller.id(), client = %request.client.id, "OAuth consent denied.");
                return Ok(with_state(vec![
                    ("error", "access_denied".into()),
                    (
                        "error_description",
                        "the member did not allow this client".into(),
                    ),
                ]));
            }
            Consent::Allow { connection, rights } => (connection, rights),
        };
        let code = self
            .grant(caller, &request, connection, rights)
            .await
            .map_err(ConsentError::Choice)?;
        Ok(with_state(vec![("code", code)]))
    }

    /// Writes the grant and its first code; answers the code.
    async fn grant(
        &self,
        caller: &Caller,
        request: &AuthorizationRequest,
        connection: Option<ConnectionSlug>,
        rights: ConnectionRights,
    ) -> Result<String> {
        let now = self.now();
        let live = self
            .inner
            .store
            .tokens(Some(caller.id()))
            .await?
            .iter()
            .filter(|t| t.scopes == agent_only() && usable(t, now))
            .count();
        if live >= super::MAX_OWN_AGENT_TOKENS {
            return Err(ServiceError::new(
                ErrorCode::TooManyTokens,
                format!(
                    "you already hold {live} live agent connections (at most {}); revoke one you no longer use",
                    super::MAX_OWN_AGENT_TOKENS
                ),
            ));
        }
        let name = match connection {
            Some(n) => n,
            None => {
                self.free_connection_name(caller.id(), &request.client.name)
                    .await?
            }
        };
        let (id, _) = new_secret();
        let token = TokenRecord {
            id: id.clone(),
            person: caller.id().clone(),
            scopes: agent_only(),
            description: format!("{} (OAuth client)", request.client.name),
            created_at: now,
            expires_at: Some(now.plus_secs(self.oauth_settings().grant_ttl_days * 86_400)),
            revoked_at: None,
            last_used_at: None,
            connection: Some(name.clone()),
            rights: Some(rights),
        };
        let code = random_secret(CODE_PREFIX);
        let grant = OAuthGrantRecord {
            token_id: id.clone(),
            client_id: request.client.id.clone(),
            resource: request.resource.clone(),
            created_at: now,
        };
        let audit = self.change(
            caller,
            "oauth.granted",
            &id,
            None,
            Some(serde_json::json!({
                "connection": name,
                "rights": rights,
                "client_id": request.client.id,
                "client_name": request.client.name,
                "redirect_uri": request.redirect_uri,
            })),
        );
        self.inner
            .store
            .insert_grant(
                token,
                // Never a SHA-256 hex digest: no bearer secret leads to this row.
                format!("oauth-grant:{id}"),
                grant,
                hash_secret(&code),
                OAuthCodeRecord {
                    token_id: id.clone(),
                    redirect_uri: request.redirect_uri.clone(),
                    code_challenge: request.challenge.clone(),
                    expires_at: now.plus_secs(self.oauth_settings().code_ttl_s),
                },
                audit,
            )
            .await
            .map_err(name_taken)?;
        self.directory_changed();
        tracing::info!(person = %caller.id(), token = %id, client = %request.client.id, "OAuth grant made.");
        Ok(code)
    }

    /// The token endpoint: a code (with its PKCE verifier) or a refresh token for an access
    /// token and a new refresh token.
    pub async fn oauth_token(&self, p: TokenParams) -> OAuthResult<serde_json::Value> {
        self.oauth_on()?;
        let client_id = p
            .client_id
            .as_deref()
            .ok_or_else(|| OAuthError::request("client_id is required (public clients send it)"))?;
        if let Some(r) = &p.resource
            && r != &self.oauth_settings().resource
        {
            return Err(OAuthError::new(
                OAuthErrorCode::InvalidTarget,
                "this server issues tokens for its own MCP endpoint only",
            ));
        }
        if p.scope
            .as_deref()
            .is_some_and(|s| s.split(' ').any(|s| !s.is_empty() && s != "agent"))
        {
            return Err(OAuthError::new(
                OAuthErrorCode::InvalidScope,
                "the only scope is agent",
            ));
        }
        match p.grant_type.as_deref() {
            Some("authorization_code") => self.redeem_code(client_id, &p).await,
            Some("refresh_token") => self.refresh(client_id, &p).await,
            Some(other) => Err(OAuthError::new(
                OAuthErrorCode::UnsupportedGrantType,
                format!("grant_type {other:?} is not offered: authorization_code or refresh_token"),
            )),
            None => Err(OAuthError::request("grant_type is required")),
        }
    }

    async fn redeem_code(
        &self,
        client_id: &str,
        p: &TokenParams,
    ) -> OAuthResult<serde_json::Value> {
        let code = p
            .code
            .as_deref()
            .ok_or_else(|| OAuthError::request("code is required"))?;
        let redirect_uri = p
            .redirect_uri
            .as_deref()
            .ok_or_else(|| OAuthError::request("redirect_uri is required"))?;
        let verifier = p
            .code_verifier
            .as_deref()
            .ok_or_else(|| OAuthError::request("code_verifier is required (PKCE)"))?;
        self.oauth_client(client_id).await?;
        let now = self.now();
        let (code, grant) = match self
            .inner
            .store
            .spend_code(hash_secret(code), now)
            .await
            .map_err(|e| server_error(e.into()))?
        {
            CodeUse::Unknown => return Err(OAuthError::grant("unknown authorization code")),
            CodeUse::Spent(code) => {
                self.revoke_grant(&code.token_id, "oauth.code_reused").await;
                return Err(OAuthError::grant(
                    "this authorization code was used before: the grant it made is revoked",
                ));
            }
            CodeUse::Fresh(code, grant) => (code, grant),
        };
        if grant.client_id != client_id {
            return Err(OAuthError::grant(
                "this authorization code was issued to another client",
            ));
        }
        if code.expires_at <= now {
            return Err(OAuthError::grant("this authorization code has expired"));
        }
        if code.redirect_uri != redirect_uri {
            return Err(OAuthError::grant(
                "redirect_uri differs from the authorization request's",
            ));
        }
        if !verifier_matches(verifier, &code.code_challenge) {
            return Err(OAuthError::grant(
                "code_verifier does not match the code_challenge (PKCE)",
            ));
        }
        let token = self.live_grant(&grant).await?;
        self.tokens_for(&token).await
    }

    async fn refresh(&self, client_id: &str, p: &TokenParams) -> OAuthResult<serde_json::Value> {
        let presented = p
            .refresh_token
            .as_deref()
            .ok_or_else(|| OAuthError::request("refresh_token is required"))?;
        let hash = hash_secret(presented);
        let record = self
            .inner
            .store
            .refresh_token(&hash)
            .await
            .map_err(|e| server_error(e.into()))?
            .ok_or_else(|| OAuthError::grant("unknown refresh token"))?;
        if record.grant.client_id != client_id {
            return Err(OAuthError::grant(
                "this refresh token was issued to another client",
            ));
        }
        if record.used_at.is_some() {
            self.revoke_grant(&record.grant.token_id, "oauth.refresh_reused")
                .await;
            return Err(OAuthError::grant(
                "this refresh token was used before: the grant is revoked; authorize again",
            ));
        }
        let token = self.live_grant(&record.grant).await?;
        let now = self.now();
        if record.expires_at <= now {
            return Err(OAuthError::grant("this refresh token has expired"));
        }
        let next = random_secret(REFRESH_PREFIX);
        match self
            .inner
            .store
            .rotate_refresh_token(hash, hash_secret(&next), now, grant_end(&token, now))
            .await
            .map_err(|e| server_error(e.into()))?
        {
            Rotation::Rotated => Ok(self.answer(&token, next, now)?),
            Rotation::Reused => {
                self.revoke_grant(&record.grant.token_id, "oauth.refresh_reused")
                    .await;
                Err(OAuthError::grant(
                    "this refresh token was used before: the grant is revoked; authorize again",
                ))
            }
            Rotation::Unknown => Err(OAuthError::grant("unknown refresh token")),
        }
    }

    /// The grant's connection, if it can still be used.
    async fn live_grant(&self, grant: &OAuthGrantRecord) -> OAuthResult<TokenRecord> {
        let token = self
            .inner
            .store
            .token_by_id(&grant.token_id)
            .await
            .map_err(|e| server_error(e.into()))?
            .ok_or_else(|| OAuthError::grant("unknown grant"))?;
        if token.revoked_at.is_some() {
            return Err(OAuthError::grant("this grant was revoked; authorize again"));
        }
        if token.expires_at.is_some_and(|e| e <= self.now()) {
            return Err(OAuthError::grant("this grant has expired; authorize again"));
        }
        Ok(token)
    }

    /// A first refresh token stored, and the answer with it.
    async fn tokens_for(&self, token: &TokenRecord) -> OAuthResult<serde_json::Value> {
        let now = self.now();
        let refresh = random_secret(REFRESH_PREFIX);
        self.inner
            .store
            .insert_refresh_token(
                hash_secret(&refresh),
                token.id.clone(),
                now,
                grant_end(token, now),
            )
            .await
            .map_err(|e| server_error(e.into()))?;
        self.answer(token, refresh, now)
    }

    /// The token response (RFC 6749 §5.1) with a new access token.
    fn answer(
        &self,
        token: &TokenRecord,
        refresh: String,
        now: Timestamp,
    ) -> OAuthResult<serde_json::Value> {
        let ttl = self.oauth_settings().access_token_ttl_s;
        let expires = now.plus_secs(ttl).min(grant_end(token, now));
        let access = self
            .access_token(&token.id, expires)
            .map_err(server_error)?;
        Ok(serde_json::json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": ((expires.0 - now.0) / 1000).max(1),
            "refresh_token": refresh,
            "scope": "agent",
        }))
    }

    fn access_token(&self, token_id: &str, expires: Timestamp) -> Result<String> {
        let key = self.oauth_key("oauth access token")?;
        let body = format!("{token_id}.{}", expires.0);
        let mac = ring::hmac::sign(&key, body.as_bytes());
        Ok(format!(
            "{ACCESS_PREFIX}{body}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.as_ref())
        ))
    }

    /// The grant (token id) and expiry of an access token whose MAC holds, whatever its age.
    fn open_access_token(&self, secret: &str) -> Option<(String, Timestamp)> {
        let rest = secret.strip_prefix(ACCESS_PREFIX)?;
        let (body, mac) = rest.rsplit_once('.')?;
        let (token_id, expires) = body.split_once('.')?;
        let expires = Timestamp(expires.parse().ok()?);
        let mac = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(mac)
            .ok()?;
        let key = self.oauth_key("oauth access token").ok()?;
        ring::hmac::verify(&key, body.as_bytes(), &mac).ok()?;
        Some((token_id.to_owned(), expires))
    }

    /// The caller an access token authenticates: its grant's connection, as if by the
    /// connection's own token (scope `agent`, her rights). An expired access token is
    /// `token_expired` (the client refreshes); a revoked or expired grant `token_revoked` or
    /// `token_expired`.
    pub(super) async fn authenticate_access(&self, secret: &str) -> Result<Caller> {
        let unknown = || {
            ServiceError::new(
                ErrorCode::Unauthenticated,
                "unknown or malformed OAuth access token",
            )
        };
        if self.oauth_on().is_err() || secret.len() > 300 {
            return Err(unknown());
        }
        let (token_id, expires) = self.open_access_token(secret).ok_or_else(unknown)?;
        if expires <= self.now() {
            return Err(ServiceError::new(
                ErrorCode::TokenExpired,
                "this access token has expired; refresh it",
            ));
        }
        let token = self
            .inner
            .store
            .token_by_id(&token_id)
            .await?
            .ok_or_else(unknown)?;
        if token.revoked_at.is_some() {
            return Err(ServiceError::new(
                ErrorCode::TokenRevoked,
                "this connection was revoked; connect again",
            ));
        }
        if token.expires_at.is_some_and(|e| e <= self.now()) {
            return Err(ServiceError::new(
                ErrorCode::TokenExpired,
                "this connection has expired; connect again",
            ));
        }
        let person = self
            .inner
            .store
            .person(&token.person)
            .await?
            .filter(|p| p.kind == PersonKind::Member)
            .ok_or_else(|| {
                ServiceError::new(ErrorCode::TokenRevoked, "this token's person was removed")
            })?;
        let connection = Self::caller_connection(&token, true);
        let caller = Caller {
            person,
            scopes: token.scopes,
            token_id: token.id,
            agent: None,
            connection,
            via: crate::domain::DecisionPath::Api,
            // The connection's expiry, not the access token's: a session outlives one access
            // token (the client refreshes; each request is checked anyway).
            expires_at: token.expires_at,
        };
        crate::metrics::identified(caller.person.id.as_str());
        self.inner.limits.admit(&caller)?;
        self.used(&caller.token_id);
        Ok(caller)
    }

    /// Revocation (RFC 7009): an access or refresh token of `client_id` revokes its grant.
    /// Unknown tokens, and tokens of another client, change nothing and answer the same.
    pub async fn oauth_revoke(&self, token: &str, client_id: Option<&str>) -> OAuthResult<()> {
        self.oauth_on()?;
        let grant = if token.starts_with(ACCESS_PREFIX) {
            match self.open_access_token(token) {
                Some((id, _)) => self
                    .inner
                    .store
                    .oauth_grant(&id)
                    .await
                    .map_err(|e| server_error(e.into()))?,
                None => None,
            }
        } else {
            self.inner
                .store
                .refresh_token(&hash_secret(token))
                .await
                .map_err(|e| server_error(e.into()))?
                .map(|r| r.grant)
        };
        if let Some(grant) = grant
            && client_id.is_none_or(|c| c == grant.client_id)
        {
            self.revoke_grant(&grant.token_id, "oauth.revoked").await;
        }
        Ok(())
    }

    /// Revokes a grant's connection (its person as the actor), ending its sessions; audited as
    /// `event`. A failure is logged: the caller's refusal stands either way.
    async fn revoke_grant(&self, token_id: &str, event: &'static str) {
        let done = async {
            let Some(token) = self.inner.store.token_by_id(token_id).await? else {
                return Ok::<_, crate::store::StoreError>(());
            };
            let audit = AdminChange {
                at: self.now(),
                actor: Some(token.person.clone()),
                via: None,
                event,
                subject: token.id.clone(),
                before: super::audit::shown(&token),
                after: None,
            };
            if self
                .inner
                .store
                .revoke_token(token.id.clone(), self.now(), audit)
                .await?
            {
                self.token_revoked(&token);
                tracing::warn!(token = %token.id, person = %token.person, event, "OAuth grant revoked.");
            }
            Ok(())
        };
        if let Err(e) = done.await {
            tracing::error!(error = %e, token = %token_id, "Could not revoke an OAuth grant.");
        }
    }
}

fn agent_only() -> Scopes {
    Scopes::default().with(Scope::Agent)
}

/// When a grant's refresh tokens stop: its connection's expiry.
fn grant_end(token: &TokenRecord, now: Timestamp) -> Timestamp {
    token.expires_at.unwrap_or(now.plus_secs(86_400))
}
