//! The outbound bridge (SPEC §8b): remote A2A agents that internal agents delegate to.
//!
//! - [`card`]: fetching a remote's Agent Card through the SSRF-safe outbound client, verifying
//!   its signature against keys fetched from the card's own origin, choosing the interface, and
//!   what a refresh changed.
//! - [`client`]: [`A2aClient`], the A2A 1.0 client over the three bindings (JSON-RPC, HTTP+JSON,
//!   gRPC), with the remote's credentials on every call; [`CallError`] says what went wrong.
//! - [`Credentials`]: what liaison presents to a remote (bearer token, OAuth2 client credentials,
//!   extra headers); sealed under the master key in the store, opened only into a
//!   [`RemoteTarget`].
//!
//! - [`observe`]: what the remote's answers mean in liaison's terms (`domain::RemoteUpdate`), and
//!   a failed call as an attempt's result for the outbox's retry rules.
//!
//! The A2A client only: it depends on the outbound client (every byte leaves through its address
//! guard), the A2A wire types and the key sets; the service and the workers call it, never the
//! reverse (the sender and follower are `crate::workers::remote`, the push receiver
//! `crate::a2a::push_receiver`). Decisions (interface order,
//! caps, credentials) are in `README.md` next to this file.

mod call;
pub mod card;
pub mod client;
mod error;
mod grpc;
mod oauth;
pub mod observe;
mod sse;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use call::EventStream;
pub use client::A2aClient;
pub use error::{CallError, RemoteError};

use crate::domain::PersonId;

/// The path of liaison's receiver for the remote agents' push notifications.
pub const PUSH_PATH: &str = "/remote/v1/push";

/// An A2A protocol binding liaison can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Binding {
    #[serde(rename = "JSONRPC")]
    JsonRpc,
    #[serde(rename = "HTTP+JSON")]
    HttpJson,
    #[serde(rename = "GRPC")]
    Grpc,
}

impl Binding {
    /// The preference order when the admin names none: gRPC (one HTTP/2 connection, binary
    /// framing, native streaming), then JSON-RPC (the binding every A2A server implements first),
    /// then HTTP+JSON.
    pub const PREFERENCE: [Binding; 3] = [Binding::Grpc, Binding::JsonRpc, Binding::HttpJson];

    /// The card's `protocolBinding` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
            Binding::Grpc => "GRPC",
        }
    }

    /// A card's `protocolBinding` (case-insensitive), or the CLI's `grpc`, `jsonrpc`, `http-json`.
    pub fn parse(s: &str) -> Option<Binding> {
        match s.to_ascii_uppercase().as_str() {
            "JSONRPC" | "JSON-RPC" => Some(Binding::JsonRpc),
            "HTTP+JSON" | "HTTP-JSON" | "REST" => Some(Binding::HttpJson),
            "GRPC" => Some(Binding::Grpc),
            _ => None,
        }
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How liaison authenticates to a remote (besides extra headers).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
pub enum RemoteAuth {
    /// `Authorization: Bearer <token>`.
    Bearer { token: String },
    /// OAuth2 client-credentials grant: a token is fetched from `token_url` (HTTP Basic client
    /// authentication) and cached until shortly before it expires.
    Oauth2 {
        token_url: String,
        client_id: String,
        client_secret: String,
        #[serde(default)]
        scopes: Vec<String>,
    },
}

impl std::fmt::Debug for RemoteAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteAuth::Bearer { .. } => f.write_str("Bearer(redacted)"),
            RemoteAuth::Oauth2 {
                token_url,
                client_id,
                ..
            } => write!(f, "Oauth2({token_url}, {client_id}, secret redacted)"),
        }
    }
}

/// An extra header sent on every call to a remote (e.g. an API key).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraHeader {
    pub name: String,
    pub value: String,
}

impl std::fmt::Debug for ExtraHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: (redacted)", self.name)
    }
}

/// Everything secret liaison presents to one remote: sealed as a whole in the store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    #[serde(default)]
    pub auth: Option<RemoteAuth>,
    #[serde(default)]
    pub headers: Vec<ExtraHeader>,
}

impl Credentials {
    /// What they are, without any secret (for `remote list` and `show`).
    pub fn summary(&self) -> serde_json::Value {
        let auth = match &self.auth {
            None => serde_json::json!("none"),
            Some(RemoteAuth::Bearer { .. }) => serde_json::json!({"kind": "bearer"}),
            Some(RemoteAuth::Oauth2 {
                token_url,
                client_id,
                scopes,
                ..
            }) => serde_json::json!({
                "kind": "oauth2",
                "token_url": token_url,
                "client_id": client_id,
                "scopes": scopes,
            }),
        };
        let headers: Vec<&str> = self.headers.iter().map(|h| h.name.as_str()).collect();
        serde_json::json!({ "auth": auth, "headers": headers })
    }
}

/// Where and how to call one remote agent: what the service hands the A2A client.
#[derive(Debug, Clone)]
pub struct RemoteTarget {
    /// The remote agent's person id (its name).
    pub person: PersonId,
    pub binding: Binding,
    /// The chosen interface's URL (gRPC: `http://host:port` for h2c, `https://host:port` for TLS).
    pub url: String,
    /// Sent in every request when the interface names one.
    pub tenant: Option<String>,
    /// The card's `capabilities.streaming`.
    pub streaming: bool,
    /// The card's `capabilities.pushNotifications`.
    pub push: bool,
    /// The pinned signing keys (empty for a card registered unsigned): they verify the remote's
    /// push JWTs.
    pub keys: crate::keys::ring::Jwks,
    /// The opened credentials; `Debug` never shows a secret.
    pub credentials: Arc<Credentials>,
    /// The ids of the skills the card lists (a message may ask for one of them).
    pub skills: Vec<String>,
}
