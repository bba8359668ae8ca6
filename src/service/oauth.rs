//! OAuth 2.1 for MCP clients (SPEC §7), part one: the authorization server's settings and its
//! clients. A client is either **registered** (RFC 7591 dynamic registration: public clients
//! only, `token_endpoint_auth_method: none`, PKCE required; rate-limited per address and capped
//! in number; an admin lists and removes them) or identified by a **Client ID Metadata
//! Document** (its `client_id` is an https URL it controls; liaison reads the document through
//! the SSRF-guarded outbound client, at most [`MAX_DOCUMENT_BYTES`], and keeps it for
//! [`DOCUMENT_FRESH_S`]). Grants, codes and tokens are `oauth_grants`.
//!
//! A client's name and redirect URIs are self-declared: the consent page says so.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{Caller, Result, Service, ServiceError};
use crate::domain::oauth::{OAuthError, OAuthErrorCode, redirect_uri_problem};
use crate::domain::{Scope, Timestamp, text};
use crate::store::{AddressLimit, ClientInsert, OAuthClientRecord};

/// Largest Client ID Metadata Document read, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// How long a metadata document read is used before it is read again, in seconds.
pub const DOCUMENT_FRESH_S: u64 = 3_600;
/// Most redirect URIs one client may declare.
pub(super) const MAX_REDIRECT_URIS: usize = 10;
/// Longest client name, in characters.
pub(super) const MAX_CLIENT_NAME_CHARS: usize = 80;

/// `kind` of a registered client.
pub(super) const REGISTERED: &str = "registered";
/// `kind` of a client known by its metadata document.
pub(super) const METADATA_DOCUMENT: &str = "metadata_document";

/// The authorization server's settings (`[oauth]`): on by default. Off, the protected-resource
/// metadata names no authorization server and every OAuth endpoint answers 404, so clients use a
/// pasted token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    pub enabled: bool,
    /// The issuer identifier (see [`issuer_for`]) and the one resource it issues tokens for
    /// (`…/mcp`); filled by the app from `public_url`.
    pub issuer: String,
    pub resource: String,
    /// Lifetime of an access token, in seconds (short: a revoked grant is refused at once
    /// anyway, since every request checks it).
    pub access_token_ttl_s: u64,
    /// Lifetime of a grant (the connection) and of each refresh token, in days.
    pub grant_ttl_days: u64,
    /// Lifetime of an authorization code, in seconds.
    pub code_ttl_s: u64,
    /// Registrations one address may make per hour.
    pub registrations_per_hour: usize,
    /// Most registered clients at once, and most metadata-document clients remembered.
    pub max_registered_clients: i64,
}

impl OAuthSettings {
    /// The issuer without its trailing `/`, to build the endpoints' URLs on.
    pub fn base(&self) -> &str {
        self.issuer.trim_end_matches('/')
    }
}

/// The issuer identifier of a server at `public_url`: the URL itself, without a trailing `/`
/// (`https://liaison.example`), as RFC 8414 §3.3 wants it identical to the URL the well-known
/// path was built on and as the MCP conformance suite checks it; the authorization response's
/// `iss` (RFC 9207) is the same string. (The official Python SDK renders a root issuer through a
/// URL type that adds a `/`, so its own comparison of `iss` with the metadata's `issuer` fails for
/// any root issuer: a client using it leaves `iss` out of what its callback hands the SDK.)
pub fn issuer_for(public_url: &str) -> String {
    public_url.trim_end_matches('/').to_owned()
}

impl Default for OAuthSettings {
    fn default() -> Self {
        OAuthSettings {
            enabled: true,
            issuer: String::new(),
            resource: String::new(),
            access_token_ttl_s: 900,
            grant_ttl_days: 90,
            code_ttl_s: 120,
            registrations_per_hour: 20,
            max_registered_clients: 1_000,
        }
    }
}

/// Metadata documents read in the last minute, on this replica (registrations per address are
/// counted in the database).
#[derive(Default)]
pub(super) struct Registrations {
    documents: Mutex<VecDeque<Timestamp>>,
}

/// Most Client ID Metadata Documents read per minute on one replica: anyone may name one in an
/// authorization request, and each costs an outbound request.
pub(super) const DOCUMENT_READS_PER_MINUTE: usize = 60;

/// What a client asks to be registered as (RFC 7591 §2); unknown fields are kept out.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClientMetadata {
    #[serde(default)]
    pub redirect_uris: Option<Vec<String>>,
    #[serde(default)]
    pub client_name: Option<String>,
    #[serde(default)]
    pub token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    pub grant_types: Option<Vec<String>>,
    #[serde(default)]
    pub response_types: Option<Vec<String>>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub application_type: Option<String>,
    #[serde(default)]
    pub client_uri: Option<String>,
    /// A metadata document names itself.
    #[serde(default)]
    pub client_id: Option<String>,
}

/// A client as the admin lists it: what it declared, and how it is used.
#[derive(Debug, Clone, Serialize)]
pub struct OAuthClientView {
    #[serde(flatten)]
    pub client: OAuthClientRecord,
    /// Its grants (members' connections) neither revoked nor expired.
    pub live_grants: i64,
    /// The last time any of its grants was used.
    pub last_used_at: Option<Timestamp>,
}

fn metadata_error(description: impl Into<String>) -> OAuthError {
    OAuthError::new(OAuthErrorCode::InvalidClientMetadata, description)
}

/// The client's name and redirect URIs from its metadata, checked.
fn checked(m: &ClientMetadata) -> std::result::Result<(String, Vec<String>), OAuthError> {
    let uris = m
        .redirect_uris
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| {
            OAuthError::new(
                OAuthErrorCode::InvalidRedirectUri,
                "redirect_uris is required: at least one URI to send the member back to",
            )
        })?;
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(OAuthError::new(
            OAuthErrorCode::InvalidRedirectUri,
            format!("at most {MAX_REDIRECT_URIS} redirect_uris"),
        ));
    }
    for uri in &uris {
        if let Some(problem) = redirect_uri_problem(uri) {
            return Err(OAuthError::new(OAuthErrorCode::InvalidRedirectUri, problem));
        }
    }
    let name = m.client_name.as_deref().unwrap_or("").trim().to_owned();
    if name.chars().count() > MAX_CLIENT_NAME_CHARS
        || name
            .chars()
            .any(|c| c.is_control() || text::is_line_break(c))
        || text::first_storable_violation(&name).is_some()
    {
        return Err(metadata_error(format!(
            "client_name must be one line of at most {MAX_CLIENT_NAME_CHARS} characters"
        )));
    }
    let name = if name.is_empty() {
        "unnamed client".to_owned()
    } else {
        name
    };
    if let Some(types) = &m.grant_types
        && let Some(other) = types
            .iter()
            .find(|t| !matches!(t.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(metadata_error(format!(
            "grant type {other:?} is not offered: only authorization_code and refresh_token"
        )));
    }
    if let Some(types) = &m.response_types
        && types.iter().any(|t| t != "code")
    {
        return Err(metadata_error("only the response type \"code\" is offered"));
    }
    if let Some(scope) = &m.scope
        && scope.split(' ').any(|s| !s.is_empty() && s != "agent")
    {
        return Err(OAuthError::new(
            OAuthErrorCode::InvalidClientMetadata,
            "the only scope is \"agent\"",
        ));
    }
    Ok((name, uris))
}

impl Service {
    /// The authorization server's settings.
    pub fn oauth_settings(&self) -> &OAuthSettings {
        &self.inner.settings.oauth
    }

    /// Refuses when the authorization server is off (the fronts answer 404 before asking).
    pub(super) fn oauth_on(&self) -> std::result::Result<(), OAuthError> {
        let s = self.oauth_settings();
        if s.enabled && !s.resource.is_empty() && self.inner.master_key.is_some() {
            Ok(())
        } else {
            Err(OAuthError::new(
                OAuthErrorCode::TemporarilyUnavailable,
                "OAuth is turned off on this server: connect with a token from the console",
            ))
        }
    }

    /// Registers a client (RFC 7591) from `from`; at most `registrations_per_hour` per address
    /// and `max_registered_clients` in all, both counted in the database (so they hold for the
    /// whole deployment, however many replicas answer). Its secret-less registration is
    /// answered.
    pub async fn oauth_register(
        &self,
        from: IpAddr,
        m: ClientMetadata,
    ) -> std::result::Result<serde_json::Value, OAuthError> {
        self.oauth_on()?;
        let (name, uris) = checked(&m)?;
        let now = self.now();
        let id = format!(
            "ocl_{}",
            crate::domain::hex(&crate::domain::secret::random::<12>())
        );
        let answer = serde_json::json!({
            "client_id": id,
            "client_id_issued_at": now.0 / 1000,
            "client_name": name,
            "redirect_uris": uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "scope": "agent",
            "application_type": m.application_type.as_deref().filter(|t| *t == "web").unwrap_or("native"),
        });
        let record = OAuthClientRecord {
            id: id.clone(),
            kind: REGISTERED.into(),
            name,
            redirect_uris: uris,
            metadata: answer.clone(),
            registered_from: Some(from.to_string()),
            created_at: now,
            fetched_at: now,
        };
        let max = self.oauth_settings().max_registered_clients;
        let per_hour = self.oauth_settings().registrations_per_hour;
        let limit = AddressLimit {
            per_window: i64::try_from(per_hour).unwrap_or(i64::MAX),
            since: Timestamp(now.0 - 3_600_000),
        };
        match self
            .inner
            .store
            .insert_oauth_client(record, max, Some(limit))
            .await
            .map_err(|e| server_error(e.into()))?
        {
            ClientInsert::Inserted => {}
            ClientInsert::Full => {
                return Err(OAuthError::new(
                    OAuthErrorCode::TemporarilyUnavailable,
                    format!(
                        "this server holds its most registered clients ({max}); an admin removes unused ones"
                    ),
                ));
            }
            ClientInsert::AddressLimit { oldest } => {
                let wait = ((oldest.0 + 3_600_000 - now.0) / 1000).max(1) as u64;
                let mut e = OAuthError::new(
                    OAuthErrorCode::TemporarilyUnavailable,
                    format!(
                        "at most {per_hour} registrations an hour from one address; try again in {wait} s"
                    ),
                );
                e.retry_after_s = Some(wait);
                return Err(e);
            }
        }
        tracing::info!(client = %id, from = %from, "OAuth client registered.");
        Ok(answer)
    }

    /// The client `id`: a registered one, or the one a metadata document URL names (read, or
    /// re-read when older than [`DOCUMENT_FRESH_S`]). Unknown, unreadable and invalid are
    /// `invalid_client`, with why.
    pub(super) async fn oauth_client(
        &self,
        id: &str,
    ) -> std::result::Result<OAuthClientRecord, OAuthError> {
        let unknown = || {
            OAuthError::new(
                OAuthErrorCode::InvalidClient,
                "unknown client_id: register first, or use a Client ID Metadata Document URL",
            )
        };
        if id.is_empty() || id.len() > 2_000 {
            return Err(unknown());
        }
        let stored = self
            .inner
            .store
            .oauth_client(id)
            .await
            .map_err(|e| server_error(e.into()))?;
        if !id.contains("://") {
            return stored.filter(|c| c.kind == REGISTERED).ok_or_else(unknown);
        }
        let now = self.now();
        let stored_any = stored.is_some();
        if let Some(c) = stored
            && c.kind == METADATA_DOCUMENT
            && c.fetched_at.plus_secs(DOCUMENT_FRESH_S) > now
        {
            return Ok(c);
        }
        let c = self.read_metadata_document(id, now).await?;
        let store = &self.inner.store;
        let kept = if stored_any {
            store.upsert_document_client(c.clone()).await
        } else {
            // A new document client is kept only below the cap (beyond it, it is read again
            // each time it is needed, and stored nowhere).
            store
                .insert_oauth_client(
                    c.clone(),
                    self.oauth_settings().max_registered_clients,
                    None,
                )
                .await
                .map(|_| ())
        };
        kept.map_err(|e| server_error(e.into()))?;
        Ok(c)
    }

    /// Reads and checks the Client ID Metadata Document at `url`.
    async fn read_metadata_document(
        &self,
        url: &str,
        now: Timestamp,
    ) -> std::result::Result<OAuthClientRecord, OAuthError> {
        let refused = |why: String| OAuthError::new(OAuthErrorCode::InvalidClient, why);
        if let Some(problem) = document_url_problem(url) {
            return Err(refused(problem));
        }
        {
            let mut reads = self
                .inner
                .oauth_registrations
                .documents
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            while reads.front().is_some_and(|t| t.0 <= now.0 - 60_000) {
                reads.pop_front();
            }
            if reads.len() >= DOCUMENT_READS_PER_MINUTE {
                let mut e = OAuthError::new(
                    OAuthErrorCode::TemporarilyUnavailable,
                    "too many client metadata documents read in the last minute; try again shortly",
                );
                e.retry_after_s = Some(60);
                return Err(e);
            }
            reads.push_back(now);
        }
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        let fetched = self
            .inner
            .outbound
            .request_bounded(reqwest::Method::GET, url, headers, None, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| {
                refused(format!(
                    "the client's metadata document could not be read: {e}"
                ))
            })?;
        if fetched.status != 200 {
            return Err(refused(format!(
                "the client's metadata document answered HTTP {}",
                fetched.status
            )));
        }
        let m: ClientMetadata = serde_json::from_slice(&fetched.body).map_err(|e| {
            refused(format!(
                "the client's metadata document is not a JSON object: {e}"
            ))
        })?;
        if m.client_id.as_deref() != Some(url) {
            return Err(refused(
                "the metadata document's client_id is not its own URL".into(),
            ));
        }
        if m.token_endpoint_auth_method
            .as_deref()
            .is_some_and(|t| t != "none")
        {
            return Err(refused(
                "a metadata document client is public: token_endpoint_auth_method must be none"
                    .into(),
            ));
        }
        let (name, uris) = checked(&m).map_err(|e| refused(e.description))?;
        let metadata = serde_json::from_slice(&fetched.body).unwrap_or_default();
        Ok(OAuthClientRecord {
            id: url.to_owned(),
            kind: METADATA_DOCUMENT.into(),
            name,
            redirect_uris: uris,
            metadata,
            registered_from: None,
            created_at: now,
            fetched_at: now,
        })
    }

    /// The clients, newest first (admins).
    pub async fn oauth_clients(&self, caller: &Caller) -> Result<Vec<OAuthClientView>> {
        caller.require(Scope::Admin)?;
        let store = &self.inner.store;
        let usage = store.oauth_client_usage(self.now()).await?;
        Ok(store
            .oauth_clients()
            .await?
            .into_iter()
            .map(|client| {
                let (live_grants, last_used_at) =
                    usage.get(&client.id).copied().unwrap_or((0, None));
                OAuthClientView {
                    client,
                    live_grants,
                    last_used_at,
                }
            })
            .collect())
    }

    /// Removes a client and revokes its grants, ending their sessions (admins); audited.
    pub async fn remove_oauth_client(&self, caller: &Caller, id: &str) -> Result<()> {
        caller.require(Scope::Admin)?;
        let before = self
            .inner
            .store
            .oauth_client(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("OAuth client", id))?;
        let audit = self.change(
            caller,
            "oauth.client_removed",
            id,
            Some(serde_json::json!({ "name": before.name, "kind": before.kind })),
            None,
        );
        if !self
            .inner
            .store
            .remove_oauth_client(id.to_owned(), self.now(), audit)
            .await?
        {
            return Err(ServiceError::not_found("OAuth client", id));
        }
        self.directory_changed();
        tracing::info!(client = %id, "OAuth client removed.");
        Ok(())
    }
}

/// Why `url` cannot be a Client ID Metadata Document's URL: https, a path, no fragment, no
/// credentials, no dot segments.
fn document_url_problem(url: &str) -> Option<String> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Some(format!(
            "client_id {url:?}: a metadata document URL must be https"
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.is_empty() || authority.contains('@') {
        return Some(format!(
            "client_id {url:?}: a metadata document URL names a host and no credentials"
        ));
    }
    if path.len() <= 1 || url.contains('#') {
        return Some(format!(
            "client_id {url:?}: a metadata document URL has a path and no fragment"
        ));
    }
    if path.split('/').any(|s| s == "." || s == "..") {
        return Some(format!("client_id {url:?}: no . or .. path segments"));
    }
    None
}

/// A store or service failure as the OAuth endpoints answer it (the cause is logged once).
pub(super) fn server_error(e: ServiceError) -> OAuthError {
    tracing::error!(error = %e.message, "An OAuth request failed.");
    OAuthError::new(
        if e.code == super::ErrorCode::Unavailable {
            OAuthErrorCode::TemporarilyUnavailable
        } else {
            OAuthErrorCode::ServerError
        },
        "the server could not complete the request; try again",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_document_urls_are_https_with_a_path() {
        assert_eq!(
            document_url_problem("https://app.example.com/oauth/client.json"),
            None
        );
        for bad in [
            "http://app.example.com/client.json",
            "https://app.example.com",
            "https://app.example.com/",
            "https://u:p@app.example.com/c",
            "https://app.example.com/a/../c",
            "https://app.example.com/c#x",
        ] {
            assert!(document_url_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn registrations_need_safe_redirects_and_offered_grants() {
        let ok = ClientMetadata {
            redirect_uris: Some(vec!["http://127.0.0.1:9/cb".into()]),
            client_name: Some("Claude".into()),
            ..Default::default()
        };
        assert_eq!(checked(&ok).unwrap().0, "Claude");
        let no_uris = ClientMetadata::default();
        assert_eq!(
            checked(&no_uris).unwrap_err().code,
            OAuthErrorCode::InvalidRedirectUri
        );
        let implicit = ClientMetadata {
            grant_types: Some(vec!["implicit".into()]),
            ..ok.clone()
        };
        assert_eq!(
            checked(&implicit).unwrap_err().code,
            OAuthErrorCode::InvalidClientMetadata
        );
        let evil = ClientMetadata {
            redirect_uris: Some(vec!["javascript:alert(1)".into()]),
            ..ok
        };
        assert_eq!(
            checked(&evil).unwrap_err().code,
            OAuthErrorCode::InvalidRedirectUri
        );
    }
}
