//! The Agent Card: read from `agent-card/card.toml`, completed with the configured public base URL
//! (never a request's Host header) and the interfaces served, then signed.
//!
//! Signature (A2A §8.4): a JWS in flattened form with a detached payload. The payload is the card
//! without `signatures`, rendered as ProtoJSON (presence rules: unset and default-valued fields
//! omitted, set `optional` fields kept) and canonicalised with RFC 8785 (JCS). The protected header
//! is `{"alg":"ES256","jku":…,"kid":…,"typ":"JOSE"}`. Every key of the ring signs, so a client
//! holding any published key verifies.
//!
//! Interop with a2a-sdk's verifier, which drops every empty string, list and object before
//! canonicalising and escapes non-ASCII characters: a card with no empty value and only ASCII text
//! canonicalises identically under both, so [`CardDefinition`] refuses anything else.

mod definition;
mod endpoints;
mod extensions;
pub use extensions::DIRECT_ANSWERS_EXTENSION;
mod sign;

pub use definition::{Capabilities, CardDefinition};
pub use endpoints::Endpoints;
pub use sign::{CardSigner, SignedCard};

use serde::Deserialize;

use crate::domain::{ChannelName, Impact, Kind};
use crate::keys::ring::KeyError;

/// The card definition file inside the card directory.
pub const CARD_FILE: &str = "card.toml";
/// Path of the public card (RFC 8615 well-known URI).
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// Path of the key set the card's `jku` points at.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";
/// The protocol version every interface advertises.
pub const PROTOCOL_VERSION: &str = "1.0";
/// Name of the bearer-token security scheme in the card.
pub const BEARER_SCHEME: &str = "bearer";
/// Name of the OpenID Connect security scheme in the card.
pub const OIDC_SCHEME: &str = "oidc";

#[derive(Debug, thiserror::Error)]
pub enum CardError {
    #[error("Could not read the agent card {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("The agent card is not valid: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("The agent card is not valid: {0}")]
    Invalid(String),
    #[error("Could not sign the agent card: {0}")]
    Key(#[from] KeyError),
    #[error("Could not render the agent card: {0}")]
    Json(#[from] serde_json::Error),
}

/// Where a skill's tasks go: a thread in `channel` opened with a message of `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillRoute {
    pub channel: ChannelName,
    pub kind: Kind,
    /// Only for `request`; absent means `none`.
    #[serde(default)]
    pub impact: Option<Impact>,
}

/// How a skill's answers reach the party (`reply` of a skill in `card.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplyMode {
    /// Always as the task (the default).
    #[default]
    Task,
    /// A single reply within a blocking wait as a bare `Message` (a conversational skill); any
    /// other answer as the task.
    Message,
}

#[cfg(test)]
mod tests;
