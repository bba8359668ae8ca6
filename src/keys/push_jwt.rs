//! How the gateway authenticates itself to a push-notification (or admin webhook) receiver when
//! the config gives no credentials of its own: `Authorization: Bearer <JWT>`, ES256, signed by the
//! current key of the ring (its `kid` is in `/.well-known/jwks.json`).
//!
//! Claims (after the JWT + JWKS example of A2A's streaming-and-async guide, which names no body
//! claim): `iss` = our public URL, `aud` = the webhook URL, `iat`, `exp` (`iat` + 5 minutes), `jti`
//! (unique per delivery attempt), `taskId` (absent for webhooks not about a task), and
//! `request_body_sha256`: lowercase hex SHA-256 of the exact body bytes sent, so a receiver can
//! tell the body was not swapped under a valid token.

use serde_json::{Value, json};

use super::ring::{Jwks, KeyError, KeyRing};

/// Lifetime of a push token, in seconds.
pub const PUSH_JWT_TTL_SECONDS: i64 = 300;
/// Clock skew a receiver tolerates on `iat`, in seconds.
pub const CLOCK_SKEW_SECONDS: i64 = 60;

/// What one delivery is about.
#[derive(Debug, Clone, Copy)]
pub struct PushDelivery<'a> {
    /// Our public base URL.
    pub issuer: &'a str,
    /// The webhook URL the body is POSTed to.
    pub audience: &'a str,
    pub task_id: Option<&'a str>,
    /// The exact bytes of the request body.
    pub body: &'a [u8],
    /// Unix seconds.
    pub now: i64,
}

/// The bearer token of one delivery.
pub fn push_jwt(keys: &KeyRing, delivery: &PushDelivery<'_>) -> Result<String, KeyError> {
    let mut claims = json!({
        "iss": delivery.issuer,
        "aud": delivery.audience,
        "iat": delivery.now,
        "exp": delivery.now + PUSH_JWT_TTL_SECONDS,
        "jti": uuid::Uuid::now_v7().to_string(),
        "request_body_sha256": crate::domain::sha256_hex(delivery.body),
    });
    if let Some(task_id) = delivery.task_id {
        claims["taskId"] = json!(task_id);
    }
    keys.signer().sign_jwt(&claims)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PushJwtError {
    #[error("The token is malformed or not signed by a published key")]
    BadSignature,
    #[error("The token is for another issuer or audience")]
    WrongParty,
    #[error("The token is expired or not yet valid")]
    Expired,
    #[error("The token is for another body")]
    BodyMismatch,
}

/// What a receiver checks (used by our tests' webhook receivers): through jsonwebtoken, the
/// signature by the key of `jwks` the header names (ES256 only), `iss` and `aud`; then the time
/// window at `expected.now` (the receiver's clock, which in tests is the gateway's test clock, so
/// the crate's system-clock `exp` check is off and `exp`/`iat` must be integers), and the body
/// hash. Returns the claims.
pub fn verify_push_jwt(
    jwks: &Jwks,
    token: &str,
    expected: &PushDelivery<'_>,
) -> Result<Value, PushJwtError> {
    use jsonwebtoken::errors::ErrorKind;
    let key = jwks.jwt_key(token).ok_or(PushJwtError::BadSignature)?;
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_issuer(&[expected.issuer]);
    validation.set_audience(&[expected.audience]);
    validation.set_required_spec_claims(&["iss", "aud", "exp"]);
    validation.validate_exp = false;
    let claims = super::jwt::decode::<Value>(token, &key, &validation)
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidIssuer | ErrorKind::InvalidAudience => PushJwtError::WrongParty,
            ErrorKind::MissingRequiredClaim(c) if c != "exp" => PushJwtError::WrongParty,
            ErrorKind::MissingRequiredClaim(_) => PushJwtError::Expired,
            _ => PushJwtError::BadSignature,
        })?
        .claims;
    let (Some(iat), Some(exp)) = (claims["iat"].as_i64(), claims["exp"].as_i64()) else {
        return Err(PushJwtError::Expired);
    };
    if expected.now >= exp || iat > expected.now + CLOCK_SKEW_SECONDS {
        return Err(PushJwtError::Expired);
    }
    if claims["request_body_sha256"] != crate::domain::sha256_hex(expected.body) {
        return Err(PushJwtError::BodyMismatch);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::ring::{MasterKey, SigningKey};

    fn ring() -> KeyRing {
        let master = MasterKey::from_hex(&"11".repeat(32)).unwrap();
        let (_, record) = SigningKey::generate(&master).unwrap();
        KeyRing::open(&[record], &master).unwrap()
    }

    fn delivery(body: &[u8]) -> PushDelivery<'_> {
        PushDelivery {
            issuer: "https://liaison.example",
            audience: "https://client.example/hook",
            task_id: Some("t1"),
            body,
            now: 1_780_000_000,
        }
    }

    #[test]
    fn push_token_verifies_and_carries_the_claims() {
        let keys = ring();
        let body = br#"{"statusUpdate":{}}"#;
        let token = push_jwt(&keys, &delivery(body)).unwrap();
        let claims = verify_push_jwt(&keys.jwks(), &token, &delivery(body)).unwrap();
        assert_eq!(claims["taskId"], "t1");
        assert_eq!(claims["exp"], 1_780_000_000 + PUSH_JWT_TTL_SECONDS);
        let abc = push_jwt(&keys, &delivery(b"abc")).unwrap();
        let abc = verify_push_jwt(&keys.jwks(), &abc, &delivery(b"abc")).unwrap();
        // FIPS 180-2 test vector: SHA-256("abc").
        assert_eq!(
            abc["request_body_sha256"],
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let header: Value = serde_json::from_slice(
            &base64::Engine::decode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                token.split('.').next().unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            header,
            json!({"alg": "ES256", "kid": keys.signer().kid(), "typ": "JWT"})
        );
    }

    #[test]
    fn push_token_is_refused_for_another_body_audience_time_or_key() {
        let keys = ring();
        let token = push_jwt(&keys, &delivery(b"one")).unwrap();
        let jwks = keys.jwks();
        assert_eq!(
            verify_push_jwt(&jwks, &token, &delivery(b"two")),
            Err(PushJwtError::BodyMismatch)
        );
        let elsewhere = PushDelivery {
            audience: "https://evil.example/hook",
            ..delivery(b"one")
        };
        assert_eq!(
            verify_push_jwt(&jwks, &token, &elsewhere),
            Err(PushJwtError::WrongParty)
        );
        let later = PushDelivery {
            now: 1_780_000_000 + PUSH_JWT_TTL_SECONDS,
            ..delivery(b"one")
        };
        assert_eq!(
            verify_push_jwt(&jwks, &token, &later),
            Err(PushJwtError::Expired)
        );
        assert_eq!(
            verify_push_jwt(&ring().jwks(), &token, &delivery(b"one")),
            Err(PushJwtError::BadSignature)
        );
        let mut tampered = token.clone();
        tampered.insert(tampered.find('.').unwrap() + 2, 'A');
        assert_eq!(
            verify_push_jwt(&jwks, &tampered, &delivery(b"one")),
            Err(PushJwtError::BadSignature)
        );
    }

    #[test]
    fn every_token_has_its_own_jti() {
        let keys = ring();
        let jwks = keys.jwks();
        let token = || push_jwt(&keys, &delivery(b"x")).unwrap();
        let first = verify_push_jwt(&jwks, &token(), &delivery(b"x")).unwrap();
        let second = verify_push_jwt(&jwks, &token(), &delivery(b"x")).unwrap();
        assert_ne!(first["jti"], second["jti"]);
    }
}
