//! Signing: the public card rendered and signed once, and the extended cards signed per party
//! (JWS ES256 over the RFC 8785 canonical card without `signatures`).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::definition::first_empty;
use super::*;
use crate::keys::ring::{ALG_ES256, KeyRing};
use crate::wire::pb;

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
pub(super) fn canonical_payload(card: &pb::AgentCard) -> Result<Vec<u8>, CardError> {
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
