//! A remote agent's Agent Card: fetched through the outbound client (address guard, no
//! redirects, timeouts, at most [`MAX_CARD_BYTES`]), its signature verified, its interface chosen.
//!
//! **Signature.** A card with `signatures` must verify: a JWS (ES256) over the RFC 8785 canonical
//! card without `signatures`. The payload is rebuilt from the JSON as received (so fields liaison
//! does not know are covered too) and, failing that, from the same JSON with empty strings, lists
//! and objects dropped (a2a-sdk's canonical form). Keys come from the protected header's `jku`,
//! which must be on the card URL's origin (scheme, host and port); without a `jku`, from
//! `<origin>/.well-known/jwks.json`. A `jku` elsewhere is ignored: a card could otherwise name
//! keys its own server does not vouch for. The keys found are pinned by the caller. A card
//! without signatures is refused unless the admin allows unsigned cards.
//!
//! **Interface.** Of `supportedInterfaces` with protocol version 1.x and a binding liaison speaks,
//! the first of gRPC, JSON-RPC, HTTP+JSON ([`Binding::PREFERENCE`]) unless the admin names one. A
//! gRPC URL is `host:port` in the spec; liaison stores it as `http://host:port` (h2c) when the card
//! itself was served over http, else `https://host:port` (TLS); an explicit `grpc://`, `http://`
//! or `https://` scheme says which.

use std::collections::BTreeSet;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde_json::Value;

use super::Binding;
use crate::domain::delivery::SendFailure;
use crate::keys::ring::{Jwk, Jwks};
use crate::net::outbound::FetchError;
use crate::net::outbound::OutboundClient;
use crate::wire::pb;

/// Largest card read.
pub const MAX_CARD_BYTES: usize = 1024 * 1024;
/// Largest key set read.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Most distinct key-set URLs one card may make liaison fetch.
const MAX_KEY_SETS: usize = 4;

/// Why a card was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardError {
    /// Not an http(s) URL, or one with credentials in it.
    #[error("{0}")]
    InvalidUrl(String),
    /// The address guard refused the host (a private, loopback or other non-global address).
    #[error("{0}")]
    Refused(String),
    /// No answer, a timeout, or an error status.
    #[error("{0}")]
    Unreachable(String),
    /// An answer, but not an acceptable card (invalid, badly signed, unsigned, no interface).
    #[error("{0}")]
    Rejected(String),
}

/// One interface of a card liaison can call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub binding: Binding,
    /// Normalised: an http(s) URL for every binding.
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// A skill as liaison shows it (untrusted text: quote it when rendering).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
}

/// A card fetched and checked.
#[derive(Debug, Clone)]
pub struct VerifiedCard {
    /// The card JSON as fetched.
    pub json: String,
    pub name: String,
    /// The keys that verify it (empty when unsigned).
    pub keys: Jwks,
    /// The `kid` of the signature that verified; none for an unsigned card.
    pub verified_by: Option<String>,
    /// Every interface liaison can call, in card order.
    pub interfaces: Vec<Interface>,
    pub streaming: bool,
    pub push: bool,
    pub skills: Vec<Skill>,
}

/// What liaison remembers of a card, to compare on refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub name: String,
    pub interfaces: Vec<Interface>,
    pub streaming: bool,
    pub push: bool,
    pub skills: Vec<Skill>,
}

/// Fetches the card at `card_url`, verifies it, and lists what liaison can call.
pub async fn fetch(
    client: &OutboundClient,
    card_url: &str,
    allow_unsigned: bool,
) -> Result<VerifiedCard, CardError> {
    let origin = origin(card_url)?;
    let body = get(client, card_url, MAX_CARD_BYTES, "card").await?;
    let json = String::from_utf8(body)
        .map_err(|_| CardError::Rejected(format!("{card_url} did not answer UTF-8 JSON")))?;
    let value: Value = serde_json::from_str(&json).map_err(|e| {
        CardError::Rejected(format!("{card_url} did not answer a JSON Agent Card: {e}"))
    })?;
    let parsed = parse(&json, card_url)?;
    let signatures = value
        .get("signatures")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (keys, verified_by) = if signatures.is_empty() {
        if !allow_unsigned {
            return Err(CardError::Rejected(format!(
                "the card at {card_url} is not signed; register it unsigned only if you trust \
                 every network path to it (--allow-unsigned)"
            )));
        }
        (Jwks { keys: Vec::new() }, None)
    } else {
        let urls = key_set_urls(&signatures, &origin)?;
        let mut keys = Jwks { keys: Vec::new() };
        for url in urls {
            let body = get(client, &url, MAX_JWKS_BYTES, "key set").await?;
            for key in parse_jwks(&body).map_err(|e| {
                CardError::Rejected(format!("the key set at {url} is not a JWKS: {e}"))
            })? {
                if keys.find(&key.kid).is_none() {
                    keys.keys.push(key);
                }
            }
        }
        let kid = verify(&value, &keys).map_err(CardError::Rejected)?;
        (keys, Some(kid))
    };
    Ok(VerifiedCard {
        json,
        name: parsed.name,
        keys,
        verified_by,
        interfaces: parsed.interfaces,
        streaming: parsed.streaming,
        push: parsed.push,
        skills: parsed.skills,
    })
}

/// The interface to call: the admin's binding when given (it must be on the card), else the first
/// of [`Binding::PREFERENCE`] the card offers.
pub fn choose(interfaces: &[Interface], forced: Option<Binding>) -> Result<Interface, CardError> {
    let offered = || {
        let list: Vec<&str> = interfaces.iter().map(|i| i.binding.as_str()).collect();
        if list.is_empty() {
            "none liaison speaks".to_owned()
        } else {
            list.join(", ")
        }
    };
    let order: Vec<Binding> = match forced {
        Some(b) => vec![b],
        None => Binding::PREFERENCE.to_vec(),
    };
    order
        .iter()
        .find_map(|b| interfaces.iter().find(|i| i.binding == *b))
        .cloned()
        .ok_or_else(|| match forced {
            Some(b) => CardError::Rejected(format!(
                "the card offers no {b} interface (it offers: {})",
                offered()
            )),
            None => CardError::Rejected(format!(
                "the card offers no A2A 1.x interface over gRPC, JSON-RPC or HTTP+JSON (it offers: {})",
                offered()
            )),
        })
}

/// Reads a stored (or fetched) card: name, callable interfaces, capabilities, skills.
pub fn parse(json: &str, card_url: &str) -> Result<Parsed, CardError> {
    let card: pb::AgentCard = serde_json::from_str(json)
        .map_err(|e| CardError::Rejected(format!("not a valid A2A 1.0 Agent Card: {e}")))?;
    if card.name.trim().is_empty() {
        return Err(CardError::Rejected(
            "not a valid A2A 1.0 Agent Card: it has no name".into(),
        ));
    }
    if card.supported_interfaces.is_empty() {
        return Err(CardError::Rejected(
            "not a valid A2A 1.0 Agent Card: supportedInterfaces is empty (an A2A 0.3 card?)"
                .into(),
        ));
    }
    let secure = card_url.starts_with("https://");
    let interfaces = card
        .supported_interfaces
        .iter()
        .filter(|i| i.protocol_version == "1" || i.protocol_version.starts_with("1."))
        .filter_map(|i| {
            let binding = Binding::parse(&i.protocol_binding)?;
            let url = normalise_url(binding, &i.url, secure)?;
            Some(Interface {
                binding,
                url,
                tenant: Some(i.tenant.clone()).filter(|t| !t.is_empty()),
            })
        })
        .collect();
    let capabilities = card.capabilities.unwrap_or_default();
    Ok(Parsed {
        name: card.name,
        interfaces,
        streaming: capabilities.streaming.unwrap_or(false),
        push: capabilities.push_notifications.unwrap_or(false),
        skills: card
            .skills
            .into_iter()
            .map(|s| Skill {
                id: s.id,
                name: s.name,
                description: s.description,
                tags: s.tags,
            })
            .collect(),
    })
}

/// An interface URL as liaison calls it, or none when it is unusable.
fn normalise_url(binding: Binding, url: &str, secure_card: bool) -> Option<String> {
    let url = url.trim();
    if url.is_empty() || url.len() > 2048 {
        return None;
    }
    if binding != Binding::Grpc {
        return (url.starts_with("http://") || url.starts_with("https://"))
            .then(|| url.trim_end_matches('/').to_owned());
    }
    let (scheme, authority) = match url.split_once("://") {
        Some(("grpc" | "http", rest)) => ("http", rest),
        Some(("grpcs" | "https", rest)) => ("https", rest),
        Some(_) => return None,
        None if secure_card => ("https", url),
        None => ("http", url),
    };
    let authority = authority.trim_end_matches('/');
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        return None;
    }
    Some(format!("{scheme}://{authority}"))
}

/// `scheme://host:port` of a URL (port made explicit), refusing what liaison never fetches.
pub fn origin(url: &str) -> Result<String, CardError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| CardError::InvalidUrl(format!("{url:?} is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(CardError::InvalidUrl(format!(
            "{url:?}: the card URL must be http:// or https://"
        )));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(CardError::InvalidUrl(format!(
            "{url:?}: the card URL must not carry credentials; use --auth"
        )));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| CardError::InvalidUrl(format!("{url:?} has no host")))?;
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| CardError::InvalidUrl(format!("{url:?} has no port")))?;
    Ok(format!(
        "{}://{}:{port}",
        parsed.scheme(),
        host.to_ascii_lowercase()
    ))
}

/// The key-set URLs the signatures name (on the card's origin), or the well-known one.
fn key_set_urls(signatures: &[Value], origin_of_card: &str) -> Result<Vec<String>, CardError> {
    let mut urls = BTreeSet::new();
    let mut elsewhere = Vec::new();
    let mut without_jku = false;
    for signature in signatures {
        let Some(header) = signature
            .get("protected")
            .and_then(Value::as_str)
            .and_then(|p| URL_SAFE_NO_PAD.decode(p).ok())
            .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
        else {
            continue;
        };
        match header.get("jku").and_then(Value::as_str) {
            Some(jku) if origin(jku).is_ok_and(|o| o == origin_of_card) => {
                urls.insert(jku.to_owned());
            }
            Some(jku) => elsewhere.push(jku.to_owned()),
            None => without_jku = true,
        }
    }
    if without_jku {
        urls.insert(format!("{origin_of_card}/.well-known/jwks.json"));
    }
    if urls.is_empty() {
        return Err(CardError::Rejected(format!(
            "the card's signatures name key sets off the card's origin {origin_of_card} ({}); \
             liaison only trusts keys served by the card's own origin",
            elsewhere.join(", ")
        )));
    }
    if urls.len() > MAX_KEY_SETS {
        return Err(CardError::Rejected(format!(
            "the card's signatures name {} key sets; liaison fetches at most {MAX_KEY_SETS}",
            urls.len()
        )));
    }
    Ok(urls.into_iter().collect())
}

/// The EC P-256 keys of a JWKS (keys of other types are skipped: liaison verifies ES256 only).
pub fn parse_jwks(body: &[u8]) -> Result<Vec<Jwk>, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let keys = value
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("it has no \"keys\" list")?;
    Ok(keys
        .iter()
        .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
        .filter(|k| k.kty == "EC" && k.crv == "P-256" && !k.kid.is_empty())
        .collect())
}

/// Verifies the card's signatures against `keys`; the `kid` of the first that verifies, else why
/// not, for the admin who registers it.
fn verify(card: &Value, keys: &Jwks) -> Result<String, String> {
    crate::keys::jose::verify_card_value(card, keys).map_err(|unverified| {
        if unverified.es256_kids.is_empty() {
            "the card's signatures are not ES256 JWS signatures with a kid; liaison verifies \
             ES256 only"
                .to_owned()
        } else {
            format!(
                "the card's signature does not verify (key ids {}): the card was changed after \
                 signing, or is signed by keys its origin does not publish",
                unverified.es256_kids.join(", ")
            )
        }
    })
}

/// GETs `url` (a card or key set) with the guard and a cap.
async fn get(
    client: &OutboundClient,
    url: &str,
    max: usize,
    what: &str,
) -> Result<Vec<u8>, CardError> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT,
        reqwest::header::HeaderValue::from_static("application/json"),
    );
    match client
        .request_bounded(reqwest::Method::GET, url, headers, None, max)
        .await
    {
        Ok(f) if (200..300).contains(&f.status) => Ok(f.body),
        Ok(f) if (300..400).contains(&f.status) => Err(CardError::Unreachable(format!(
            "the {what} at {url} answered a redirect (HTTP {}); liaison follows none: register \
             the final URL",
            f.status
        ))),
        Ok(f) => Err(CardError::Unreachable(format!(
            "the {what} at {url} answered HTTP {}",
            f.status
        ))),
        Err(FetchError::TooLarge { limit }) => Err(CardError::Rejected(format!(
            "the {what} at {url} is larger than {limit} bytes"
        ))),
        Err(FetchError::Send(f)) => Err(match f {
            SendFailure::RefusedAddress(m) => CardError::Refused(format!(
                "the {what} URL {url} is refused: {m}; liaison only calls global addresses \
                 unless [outbox] allow lists them"
            )),
            SendFailure::InvalidUrl(m) => CardError::InvalidUrl(m),
            other => CardError::Unreachable(format!(
                "could not fetch the {what} at {url}: {} ({})",
                other.message(),
                other.class()
            )),
        }),
    }
}

/// What a refresh changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skills_added: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skills_removed: Vec<String>,
    /// Same id, other name, description or tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skills_changed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<(Vec<Interface>, Vec<Interface>)>,
    /// The interface calls go to, before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<(Interface, Interface)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<(bool, bool)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push: Option<(bool, bool)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<(String, String)>,
    /// Key ids published now that were not pinned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys_added: Vec<String>,
    /// Pinned key ids no longer published (or published with other key material).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys_removed: Vec<String>,
    /// Whether the card went from signed to unsigned or back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed: Option<(bool, bool)>,
}

impl Changes {
    pub fn keys_changed(&self) -> bool {
        !self.keys_added.is_empty() || !self.keys_removed.is_empty() || self.signed.is_some()
    }

    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

/// Everything that differs between the stored card and the fetched one.
pub fn changes(
    before: &Parsed,
    before_interface: &Interface,
    before_keys: &Jwks,
    before_signed: bool,
    after: &VerifiedCard,
    after_interface: &Interface,
) -> Changes {
    let ids =
        |skills: &[Skill]| -> BTreeSet<String> { skills.iter().map(|s| s.id.clone()).collect() };
    let (old_ids, new_ids) = (ids(&before.skills), ids(&after.skills));
    let changed = before
        .skills
        .iter()
        .filter(|old| {
            after
                .skills
                .iter()
                .any(|new| new.id == old.id && new != *old)
        })
        .map(|s| s.id.clone())
        .collect();
    let same_key = |a: &Jwk, b: &Jwk| a.kid == b.kid && a.x == b.x && a.y == b.y && a.crv == b.crv;
    let after_signed = after.verified_by.is_some();
    Changes {
        skills_added: new_ids.difference(&old_ids).cloned().collect(),
        skills_removed: old_ids.difference(&new_ids).cloned().collect(),
        skills_changed: changed,
        interfaces: (before.interfaces != after.interfaces)
            .then(|| (before.interfaces.clone(), after.interfaces.clone())),
        interface: (before_interface != after_interface)
            .then(|| (before_interface.clone(), after_interface.clone())),
        streaming: (before.streaming != after.streaming)
            .then_some((before.streaming, after.streaming)),
        push: (before.push != after.push).then_some((before.push, after.push)),
        name: (before.name != after.name).then(|| (before.name.clone(), after.name.clone())),
        keys_added: after
            .keys
            .keys
            .iter()
            .filter(|k| !before_keys.keys.iter().any(|p| same_key(p, k)))
            .map(|k| k.kid.clone())
            .collect(),
        keys_removed: before_keys
            .keys
            .iter()
            .filter(|p| !after.keys.keys.iter().any(|k| same_key(p, k)))
            .map(|k| k.kid.clone())
            .collect(),
        signed: (before_signed != after_signed).then_some((before_signed, after_signed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(b: Binding) -> Interface {
        Interface {
            binding: b,
            url: format!("http://x/{b}"),
            tenant: None,
        }
    }

    #[test]
    fn the_preferred_binding_is_grpc_then_jsonrpc_then_http_json_unless_forced() {
        let all = [
            iface(Binding::HttpJson),
            iface(Binding::JsonRpc),
            iface(Binding::Grpc),
        ];
        assert_eq!(choose(&all, None).unwrap().binding, Binding::Grpc);
        assert_eq!(choose(&all[..2], None).unwrap().binding, Binding::JsonRpc);
        assert_eq!(choose(&all[..1], None).unwrap().binding, Binding::HttpJson);
        assert_eq!(
            choose(&all, Some(Binding::HttpJson)).unwrap().binding,
            Binding::HttpJson
        );
        assert!(choose(&all[..1], Some(Binding::Grpc)).is_err());
        assert!(choose(&[], None).is_err());
    }

    #[test]
    fn grpc_urls_get_a_scheme_from_the_card_and_http_urls_must_have_one() {
        assert_eq!(
            normalise_url(Binding::Grpc, "h:9", false).as_deref(),
            Some("http://h:9")
        );
        assert_eq!(
            normalise_url(Binding::Grpc, "h:9", true).as_deref(),
            Some("https://h:9")
        );
        assert_eq!(
            normalise_url(Binding::Grpc, "grpcs://h:9", false).as_deref(),
            Some("https://h:9")
        );
        assert_eq!(normalise_url(Binding::Grpc, "ftp://h:9", false), None);
        assert_eq!(normalise_url(Binding::JsonRpc, "h:9/rpc", false), None);
        assert_eq!(
            normalise_url(Binding::JsonRpc, "https://h/rpc/", false).as_deref(),
            Some("https://h/rpc")
        );
    }

    #[test]
    fn origins_make_the_port_explicit_and_refuse_credentials() {
        assert_eq!(
            origin("https://Example.com/a").unwrap(),
            "https://example.com:443"
        );
        assert_eq!(origin("http://h:8080/x").unwrap(), "http://h:8080");
        assert!(origin("http://u:p@h/").is_err());
        assert!(origin("file:///etc/passwd").is_err());
    }

    #[test]
    fn a_jku_off_the_card_origin_is_not_trusted() {
        let sig = |jku: &str| {
            let header = serde_json::json!({"alg": "ES256", "kid": "k", "jku": jku});
            serde_json::json!({"protected": URL_SAFE_NO_PAD.encode(header.to_string()), "signature": "x"})
        };
        assert!(
            key_set_urls(
                &[sig("https://evil.example/jwks.json")],
                "https://a.example:443"
            )
            .is_err()
        );
        assert_eq!(
            key_set_urls(
                &[sig("https://a.example/jwks.json")],
                "https://a.example:443"
            )
            .unwrap(),
            vec!["https://a.example/jwks.json".to_owned()]
        );
    }
}
