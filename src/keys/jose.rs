//! JOSE verification, once for every caller: a card's detached-payload JWS signatures (A2A §8.4)
//! against a key set, whether liaison checks its own card (tests, replicas) or a remote agent's.
//!
//! The payload is the card without `signatures`, canonicalised with RFC 8785 (JCS), in two forms:
//! as received, and with every empty string, list and object dropped (a2a-sdk's canonical form),
//! so a card signed by either verifies. ES256 only; the first signature whose `kid` is in the set
//! and that verifies wins. Keys and JWT signing live in `ring`; this reads nothing but its inputs.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::ring::{ALG_ES256, Jwks};

/// Why a card's bytes did not verify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    #[error("The card is not a valid Agent Card")]
    Malformed,
    #[error("The card carries no signature")]
    Unsigned,
    #[error("No signature of the card verifies with a known key")]
    NoValidSignature,
}

/// No signature verified: the key ids of the ES256 signatures seen (none: no usable signature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified {
    pub es256_kids: Vec<String>,
}

/// Verifies a card as a client would, from its bytes as received; the `kid` that verified.
pub fn verify_card(card_json: &[u8], jwks: &Jwks) -> Result<String, VerifyError> {
    let card: Value = serde_json::from_slice(card_json).map_err(|_| VerifyError::Malformed)?;
    if !card.is_object() {
        return Err(VerifyError::Malformed);
    }
    let signed = card
        .get("signatures")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty());
    if !signed {
        return Err(VerifyError::Unsigned);
    }
    verify_card_value(&card, jwks).map_err(|_| VerifyError::NoValidSignature)
}

/// Verifies the signatures of `card` (parsed JSON) against `keys`; the `kid` of the first that
/// verifies.
pub fn verify_card_value(card: &Value, keys: &Jwks) -> Result<String, Unverified> {
    let mut unsigned = card.clone();
    let signatures = unsigned
        .as_object_mut()
        .and_then(|o| o.remove("signatures"))
        .and_then(|s| s.as_array().cloned())
        .unwrap_or_default();
    let mut payloads = Vec::new();
    for form in [unsigned.clone(), without_empty(unsigned)] {
        let Ok(bytes) = serde_json_canonicalizer::to_vec(&form) else {
            continue;
        };
        let encoded = URL_SAFE_NO_PAD.encode(bytes);
        if !payloads.contains(&encoded) {
            payloads.push(encoded);
        }
    }
    let mut kids_seen = Vec::new();
    for signature in &signatures {
        let (Some(protected), Some(raw)) = (
            signature.get("protected").and_then(Value::as_str),
            signature
                .get("signature")
                .and_then(Value::as_str)
                .and_then(|s| URL_SAFE_NO_PAD.decode(s).ok()),
        ) else {
            continue;
        };
        let Some(header) = URL_SAFE_NO_PAD
            .decode(protected)
            .ok()
            .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
        else {
            continue;
        };
        if header["alg"] != ALG_ES256 {
            continue;
        }
        let Some(kid) = header["kid"].as_str() else {
            continue;
        };
        kids_seen.push(kid.to_owned());
        let Some(key) = keys.find(kid) else {
            continue;
        };
        for payload in &payloads {
            if key.verify_es256(format!("{protected}.{payload}").as_bytes(), &raw) {
                return Ok(kid.to_owned());
            }
        }
    }
    Err(Unverified {
        es256_kids: kids_seen,
    })
}

/// The protected headers of a card's signatures, decoded, in the card's order: what a client
/// reads (`alg`, `kid`, `jku`, `typ`) before it verifies anything. Nothing is verified here.
pub fn signature_headers(card_json: &[u8]) -> Result<Vec<Value>, VerifyError> {
    let card: Value = serde_json::from_slice(card_json).map_err(|_| VerifyError::Malformed)?;
    let Some(signatures) = card.get("signatures").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    signatures
        .iter()
        .map(|s| {
            s.get("protected")
                .and_then(Value::as_str)
                .and_then(|p| URL_SAFE_NO_PAD.decode(p).ok())
                .and_then(|h| serde_json::from_slice::<Value>(&h).ok())
                .filter(Value::is_object)
                .ok_or(VerifyError::Malformed)
        })
        .collect()
}

/// `value` without empty strings, lists and objects, at every depth (a2a-sdk's canonical form).
fn without_empty(value: Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(k, v)| (k, without_empty(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(without_empty)
                .filter(|v| !is_empty(v))
                .collect(),
        ),
        other => other,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}
