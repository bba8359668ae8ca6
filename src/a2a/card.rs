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

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::Value;

use crate::domain::{ChannelName, Impact, Kind};
use crate::keys::ring::{ALG_ES256, Jwks, KeyError, KeyRing};
use crate::wire::pb;

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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillFile {
    id: String,
    name: String,
    description: String,
    tags: Vec<String>,
    #[serde(default)]
    examples: Vec<String>,
    #[serde(default)]
    input_modes: Vec<String>,
    #[serde(default)]
    output_modes: Vec<String>,
    route: SkillRoute,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    organization: String,
    url: String,
}

/// The optional A2A features the card declares (`AgentCard.capabilities`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    pub streaming: bool,
    /// The push-config RPCs and inline push configs; off, they answer
    /// PushNotificationNotSupported.
    pub push_notifications: bool,
    /// GetExtendedAgentCard; off, it answers UnsupportedOperation.
    pub extended_agent_card: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CapabilitiesFile {
    #[serde(default)]
    streaming: bool,
    #[serde(default)]
    push_notifications: bool,
    #[serde(default)]
    extended_agent_card: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecurityFile {
    #[serde(default = "yes")]
    bearer: bool,
    #[serde(default)]
    openid_connect_url: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CardFile {
    name: String,
    description: String,
    version: String,
    #[serde(default)]
    documentation_url: Option<String>,
    #[serde(default)]
    icon_url: Option<String>,
    default_input_modes: Vec<String>,
    default_output_modes: Vec<String>,
    default_skill: String,
    #[serde(default)]
    provider: Option<ProviderFile>,
    capabilities: CapabilitiesFile,
    security: SecurityFile,
    skills: Vec<SkillFile>,
}

/// The validated contents of `agent-card/`: identity, skills with their routes, security.
#[derive(Debug, Clone)]
pub struct CardDefinition {
    file: CardFile,
}

impl CardDefinition {
    /// Reads and validates `<dir>/card.toml`.
    pub fn load(dir: &Path) -> Result<CardDefinition, CardError> {
        let path = dir.join(CARD_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| CardError::Read {
            path: path.clone(),
            source,
        })?;
        CardDefinition::from_toml(&text)
    }

    pub fn from_toml(text: &str) -> Result<CardDefinition, CardError> {
        let file: CardFile = toml::from_str(text)?;
        validate(&file)?;
        Ok(CardDefinition { file })
    }

    /// The capability switches of `[capabilities]`.
    pub fn capabilities(&self) -> Capabilities {
        let c = &self.file.capabilities;
        Capabilities {
            streaming: c.streaming,
            push_notifications: c.push_notifications,
            extended_agent_card: c.extended_agent_card,
        }
    }

    /// The route of a skill, by id.
    pub fn route(&self, skill_id: &str) -> Option<&SkillRoute> {
        self.file
            .skills
            .iter()
            .find(|skill| skill.id == skill_id)
            .map(|skill| &skill.route)
    }

    /// The skill used when neither the message nor the party names one.
    pub fn default_skill(&self) -> &str {
        &self.file.default_skill
    }

    /// Every skill id, in card order.
    pub fn skill_ids(&self) -> impl Iterator<Item = &str> {
        self.file.skills.iter().map(|skill| skill.id.as_str())
    }

    /// Every skill with its route, as the service's settings take them (`Settings::skills`).
    pub fn skill_routes(&self) -> Vec<crate::service::SkillRoute> {
        self.file
            .skills
            .iter()
            .map(|skill| crate::service::SkillRoute {
                id: skill.id.clone(),
                channel: skill.route.channel.clone(),
                kind: skill.route.kind,
                impact: skill.route.impact,
            })
            .collect()
    }

    /// Whether the card declares an OpenID Connect scheme (JWTs from a configured issuer).
    pub fn accepts_oidc(&self) -> bool {
        self.file.security.openid_connect_url.is_some()
    }

    /// The unsigned card. `skills` limits the skills listed (the extended card of a party);
    /// `None` lists them all.
    pub(crate) fn to_proto(&self, endpoints: &Endpoints, skills: Option<&[&str]>) -> pb::AgentCard {
        let file = &self.file;
        let capabilities = self.capabilities();
        let mut security_schemes = BTreeMap::new();
        let mut security_requirements = Vec::new();
        if file.security.bearer {
            security_schemes.insert(
                BEARER_SCHEME.to_owned(),
                pb::SecurityScheme {
                    scheme: Some(pb::security_scheme::Scheme::HttpAuthSecurityScheme(
                        pb::HttpAuthSecurityScheme {
                            description:
                                "A bearer token issued to your party by an admin of this gateway."
                                    .to_owned(),
                            scheme: "Bearer".to_owned(),
                            bearer_format: String::new(),
                        },
                    )),
                },
            );
            security_requirements.push(requirement(BEARER_SCHEME, "agent"));
        }
        if let Some(url) = &file.security.openid_connect_url {
            security_schemes.insert(
                OIDC_SCHEME.to_owned(),
                pb::SecurityScheme {
                    scheme: Some(pb::security_scheme::Scheme::OpenIdConnectSecurityScheme(
                        pb::OpenIdConnectSecurityScheme {
                            description: "A JWT from the configured OpenID Connect issuer."
                                .to_owned(),
                            open_id_connect_url: url.clone(),
                        },
                    )),
                },
            );
            security_requirements.push(requirement(OIDC_SCHEME, "openid"));
        }
        pb::AgentCard {
            name: file.name.clone(),
            description: file.description.clone(),
            supported_interfaces: endpoints.interfaces(),
            provider: file.provider.as_ref().map(|provider| pb::AgentProvider {
                url: provider.url.clone(),
                organization: provider.organization.clone(),
            }),
            version: file.version.clone(),
            documentation_url: file.documentation_url.clone(),
            capabilities: Some(pb::AgentCapabilities {
                streaming: Some(capabilities.streaming),
                push_notifications: Some(capabilities.push_notifications),
                extensions: Vec::new(),
                extended_agent_card: Some(capabilities.extended_agent_card),
            }),
            security_schemes,
            security_requirements,
            default_input_modes: file.default_input_modes.clone(),
            default_output_modes: file.default_output_modes.clone(),
            skills: file
                .skills
                .iter()
                .filter(|skill| skills.is_none_or(|only| only.contains(&skill.id.as_str())))
                .map(|skill| pb::AgentSkill {
                    id: skill.id.clone(),
                    name: skill.name.clone(),
                    description: skill.description.clone(),
                    tags: skill.tags.clone(),
                    examples: skill.examples.clone(),
                    input_modes: skill.input_modes.clone(),
                    output_modes: skill.output_modes.clone(),
                    security_requirements: Vec::new(),
                })
                .collect(),
            signatures: Vec::new(),
            icon_url: file.icon_url.clone(),
        }
    }
}

/// A requirement of one scheme. The role list is never empty: a2a-sdk would drop an empty one
/// from its canonical form and no longer verify our signature.
fn requirement(scheme: &str, role: &str) -> pb::SecurityRequirement {
    pb::SecurityRequirement {
        schemes: BTreeMap::from([(
            scheme.to_owned(),
            pb::StringList {
                list: vec![role.to_owned()],
            },
        )]),
    }
}

fn validate(file: &CardFile) -> Result<(), CardError> {
    let invalid = |what: String| Err(CardError::Invalid(what));
    let mut texts: Vec<(&str, &str)> = vec![
        ("name", &file.name),
        ("description", &file.description),
        ("version", &file.version),
        ("default_skill", &file.default_skill),
    ];
    texts.extend(
        file.documentation_url
            .iter()
            .map(|url| ("documentation_url", url.as_str())),
    );
    texts.extend(file.icon_url.iter().map(|url| ("icon_url", url.as_str())));
    texts.extend(
        file.security
            .openid_connect_url
            .iter()
            .map(|url| ("openid_connect_url", url.as_str())),
    );
    texts.extend(
        file.default_input_modes
            .iter()
            .map(|mode| ("default_input_modes", mode.as_str())),
    );
    texts.extend(
        file.default_output_modes
            .iter()
            .map(|mode| ("default_output_modes", mode.as_str())),
    );
    if let Some(provider) = &file.provider {
        texts.push(("provider.organization", &provider.organization));
        texts.push(("provider.url", &provider.url));
    }
    for skill in &file.skills {
        texts.push(("skills.id", &skill.id));
        texts.push(("skills.name", &skill.name));
        texts.push(("skills.description", &skill.description));
        let lists = [
            &skill.tags,
            &skill.examples,
            &skill.input_modes,
            &skill.output_modes,
        ];
        for item in lists.into_iter().flatten() {
            texts.push(("a skill's tags, examples or modes", item));
        }
    }
    for (what, text) in texts {
        if text.trim().is_empty() {
            return invalid(format!("{what} must not be empty"));
        }
        if !text.is_ascii() {
            return invalid(format!(
                "{what} must be ASCII (clients such as a2a-sdk canonicalise non-ASCII text \
                 differently from RFC 8785, and would reject the signature): {text:?}"
            ));
        }
    }
    if file.default_input_modes.is_empty() || file.default_output_modes.is_empty() {
        return invalid("default_input_modes and default_output_modes must not be empty".into());
    }
    if file.skills.is_empty() {
        return invalid("at least one skill is needed".into());
    }
    if !file.security.bearer && file.security.openid_connect_url.is_none() {
        return invalid("security must allow bearer tokens, OpenID Connect, or both".into());
    }
    let mut ids = BTreeSet::new();
    for skill in &file.skills {
        if !ids.insert(skill.id.as_str()) {
            return invalid(format!("skill id {:?} appears twice", skill.id));
        }
        if skill.tags.is_empty() {
            return invalid(format!("skill {:?} needs at least one tag", skill.id));
        }
        let route = &skill.route;
        if !route.kind.opens_thread() {
            return invalid(format!(
                "skill {:?}: a route's kind must open a thread (announce, question, request or handoff), not {}",
                skill.id, route.kind
            ));
        }
        if route.impact.is_some() && route.kind != Kind::Request {
            return invalid(format!(
                "skill {:?}: only a request route has an impact",
                skill.id
            ));
        }
    }
    if !ids.contains(file.default_skill.as_str()) {
        return invalid(format!(
            "default_skill {:?} is not a skill of the card",
            file.default_skill
        ));
    }
    Ok(())
}

/// Where the three bindings are served, as the card advertises them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// The configured public base URL, without a trailing slash.
    pub public_url: String,
    /// JSON-RPC endpoint URL.
    pub jsonrpc_url: String,
    /// HTTP+JSON base URL (the proto's routes are appended to it).
    pub rest_url: String,
    /// gRPC `host:port` (no scheme, as the spec and the conformance kit expect); `None` when gRPC
    /// is not served.
    pub grpc_authority: Option<String>,
}

impl Endpoints {
    /// JSON-RPC at `<public>/a2a/jsonrpc`, HTTP+JSON at `<public>/a2a/rest`, gRPC at
    /// `grpc_authority` (e.g. the authority of the public URL when gRPC shares the HTTP port).
    pub fn standard(public_url: &str, grpc_authority: Option<String>) -> Endpoints {
        let public_url = public_url.trim_end_matches('/').to_owned();
        Endpoints {
            jsonrpc_url: format!("{public_url}/a2a/jsonrpc"),
            rest_url: format!("{public_url}/a2a/rest"),
            public_url,
            grpc_authority,
        }
    }

    /// `host:port` of a URL (the port made explicit from the scheme when absent).
    pub fn authority_of(url: &str) -> Option<String> {
        let (scheme, rest) = url.split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        if authority.is_empty() {
            return None;
        }
        let has_port = match authority.rfind(']') {
            Some(bracket) => authority[bracket..].contains(':'),
            None => authority.contains(':'),
        };
        if has_port {
            return Some(authority.to_owned());
        }
        let port = match scheme {
            "https" => 443,
            "http" => 80,
            _ => return None,
        };
        Some(format!("{authority}:{port}"))
    }

    fn interfaces(&self) -> Vec<pb::AgentInterface> {
        let interface = |url: &str, binding: &str| pb::AgentInterface {
            url: url.to_owned(),
            protocol_binding: binding.to_owned(),
            tenant: String::new(),
            protocol_version: PROTOCOL_VERSION.to_owned(),
        };
        // Only bindings that are served are advertised: an empty URL means "not served".
        let mut interfaces = vec![interface(&self.jsonrpc_url, "JSONRPC")];
        if !self.rest_url.is_empty() {
            interfaces.push(interface(&self.rest_url, "HTTP+JSON"));
        }
        if let Some(grpc) = &self.grpc_authority {
            interfaces.push(interface(grpc, "GRPC"));
        }
        interfaces
    }

    /// The `jku` of our signatures.
    pub fn jwks_url(&self) -> String {
        format!("{}{JWKS_PATH}", self.public_url)
    }
}

/// The signed public card, rendered once and served as is.
#[derive(Debug, Clone)]
pub struct SignedCard {
    /// The card with its signatures, for the gRPC binding (not wired yet).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) card: pb::AgentCard,
    /// ProtoJSON of `card`: the body of `/.well-known/agent-card.json`.
    json: Vec<u8>,
    /// Weak validator: the same for every rendering of the same content and keys, on every
    /// replica (ECDSA signatures are randomised, so the bytes differ between signings).
    etag: String,
    /// Body of `/.well-known/jwks.json`.
    jwks_json: Vec<u8>,
}

impl SignedCard {
    /// Builds and signs the public card with every key of `keys`.
    pub fn sign(
        definition: &CardDefinition,
        endpoints: &Endpoints,
        keys: &KeyRing,
    ) -> Result<SignedCard, CardError> {
        let mut card = definition.to_proto(endpoints, None);
        let mut validator = ring::digest::Context::new(&ring::digest::SHA256);
        sign_into(&mut card, endpoints, keys, Some(&mut validator))?;
        let json = serde_json::to_vec(&card)?;
        let etag = format!(
            "W/\"{}\"",
            URL_SAFE_NO_PAD.encode(validator.finish().as_ref())
        );
        let jwks_json = serde_json::to_vec(&keys.jwks())?;
        Ok(SignedCard {
            card,
            json,
            etag,
            jwks_json,
        })
    }

    /// The card as served (ProtoJSON).
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// The card's `ETag` (weak).
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The key set as served.
    pub fn jwks_json(&self) -> &[u8] {
        &self.jwks_json
    }
}

/// Appends one signature per key of `keys` to `card` (JWS ES256 over the RFC 8785 canonical card
/// without `signatures`; protected header `alg`, `jku`, `kid`, `typ`). `validator`, when given,
/// digests what identifies the signed content and keys (for the `ETag`).
fn sign_into(
    card: &mut pb::AgentCard,
    endpoints: &Endpoints,
    keys: &KeyRing,
    mut validator: Option<&mut ring::digest::Context>,
) -> Result<(), CardError> {
    let payload = canonical_payload(card)?;
    let encoded_payload = URL_SAFE_NO_PAD.encode(&payload);
    let jku = endpoints.jwks_url();
    if let Some(v) = validator.as_deref_mut() {
        v.update(&payload);
    }
    for key in keys.keys() {
        let header = serde_json::json!({
            "alg": ALG_ES256,
            "jku": jku,
            "kid": key.kid(),
            "typ": "JOSE",
        });
        let protected = URL_SAFE_NO_PAD.encode(serde_json_canonicalizer::to_vec(&header)?);
        let signing_input = format!("{protected}.{encoded_payload}");
        let signature = key.sign(signing_input.as_bytes())?;
        if let Some(v) = validator.as_deref_mut() {
            v.update(protected.as_bytes());
        }
        card.signatures.push(pb::AgentCardSignature {
            protected,
            signature: URL_SAFE_NO_PAD.encode(signature),
            header: None,
        });
    }
    Ok(())
}

/// What signs cards after start-up: a party's extended card (GetExtendedAgentCard), which lists
/// only the skills that party may use, signed like the public card.
#[derive(Debug)]
pub struct CardSigner {
    definition: CardDefinition,
    endpoints: Endpoints,
    /// The ring in use: swapped by a rotation, so every signature uses the current keys.
    keys: crate::keys::LiveRing,
}

impl CardSigner {
    pub fn new(definition: CardDefinition, endpoints: Endpoints, keys: KeyRing) -> CardSigner {
        Self::live(definition, endpoints, crate::keys::LiveRing::new(keys))
    }

    /// A signer over a ring that rotations swap (the server's).
    pub fn live(
        definition: CardDefinition,
        endpoints: Endpoints,
        keys: crate::keys::LiveRing,
    ) -> CardSigner {
        CardSigner {
            definition,
            endpoints,
            keys,
        }
    }

    /// The signed public card (served at [`CARD_PATH`]).
    pub fn public(&self) -> Result<SignedCard, CardError> {
        SignedCard::sign(&self.definition, &self.endpoints, &self.keys.current())
    }

    /// Whether the card declares `capabilities.extendedAgentCard`.
    pub fn offers_extended_card(&self) -> bool {
        self.capabilities().extended_agent_card
    }

    /// The optional features the card declares: the one place the operations read them from, so
    /// what the card promises and what the server answers cannot drift apart.
    pub fn capabilities(&self) -> Capabilities {
        self.definition.capabilities()
    }

    /// The extended card listing only `skills` (ids; unknown ones are ignored), signed.
    pub fn extended(&self, skills: &[&str]) -> Result<pb::AgentCard, CardError> {
        let mut card = self.definition.to_proto(&self.endpoints, Some(skills));
        sign_into(&mut card, &self.endpoints, &self.keys.current(), None)?;
        Ok(card)
    }
}

/// The JWS payload of a card: its ProtoJSON without `signatures`, canonicalised by RFC 8785.
fn canonical_payload(card: &pb::AgentCard) -> Result<Vec<u8>, CardError> {
    let mut unsigned = card.clone();
    unsigned.signatures.clear();
    let value = serde_json::to_value(&unsigned)?;
    if let Some(path) = first_empty(&value, String::new()) {
        return Err(CardError::Invalid(format!(
            "{path} is empty; a2a-sdk would canonicalise the card differently"
        )));
    }
    Ok(serde_json_canonicalizer::to_vec(&value)?)
}

/// The path of the first empty string, array or object in `value`, if any.
fn first_empty(value: &Value, path: String) -> Option<String> {
    match value {
        Value::String(text) if text.is_empty() => Some(path),
        Value::Array(items) if items.is_empty() => Some(path),
        Value::Object(members) if members.is_empty() => Some(path),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, item)| first_empty(item, format!("{path}[{index}]"))),
        Value::Object(members) => members
            .iter()
            .find_map(|(key, member)| first_empty(member, format!("{path}.{key}"))),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    #[error("The card is not a valid Agent Card")]
    Malformed,
    #[error("The card carries no signature")]
    Unsigned,
    #[error("No signature of the card verifies with a known key")]
    NoValidSignature,
}

/// Verifies a card as a client would: rebuild the canonical payload from the card as received,
/// then accept the first ES256 signature whose `kid` is in `jwks` and that verifies. Returns that
/// `kid`.
pub fn verify_card(card_json: &[u8], jwks: &Jwks) -> Result<String, VerifyError> {
    let card: pb::AgentCard =
        serde_json::from_slice(card_json).map_err(|_| VerifyError::Malformed)?;
    if card.signatures.is_empty() {
        return Err(VerifyError::Unsigned);
    }
    let mut unsigned = card.clone();
    unsigned.signatures.clear();
    let value = serde_json::to_value(&unsigned).map_err(|_| VerifyError::Malformed)?;
    let payload = serde_json_canonicalizer::to_vec(&value).map_err(|_| VerifyError::Malformed)?;
    let encoded_payload = URL_SAFE_NO_PAD.encode(payload);
    for signature in &card.signatures {
        let Ok(header) = URL_SAFE_NO_PAD.decode(&signature.protected) else {
            continue;
        };
        let Ok(header) = serde_json::from_slice::<Value>(&header) else {
            continue;
        };
        if header["alg"] != ALG_ES256 {
            continue;
        }
        let Some(key) = header["kid"].as_str().and_then(|kid| jwks.find(kid)) else {
            continue;
        };
        let Ok(raw) = URL_SAFE_NO_PAD.decode(&signature.signature) else {
            continue;
        };
        let signing_input = format!("{}.{encoded_payload}", signature.protected);
        if key.verify_es256(signing_input.as_bytes(), &raw) {
            return Ok(key.kid.clone());
        }
    }
    Err(VerifyError::NoValidSignature)
}

#[cfg(test)]
mod tests;
