//! JWTs of a configured issuer as party credentials (the card's `openIdConnect` scheme).
//!
//! A token is accepted when its signature verifies with a key of the issuer's key set (RS256 or
//! ES256; the algorithm comes from our key, never from the token alone, and `none`/HMAC are
//! refused), `iss` is the configured issuer, `aud` names the configured audience, `exp` is in the
//! future and `nbf` (if any) in the past, both with a small leeway. Its `sub` is then mapped to a
//! party by the service (`party add --jwt-subject`).
//!
//! The key set comes from a file (read at start) or a URL (fetched on first use, refreshed every
//! [`REFRESH`], and again when a token names an unknown `kid`, at most once per [`REFETCH_GAP`], so
//! a flood of forged kids cannot make us hammer the issuer).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::Mutex;

/// How long a fetched key set is used before it is fetched again.
pub const REFRESH: Duration = Duration::from_secs(600);
/// The shortest time between two fetches of the key set.
pub const REFETCH_GAP: Duration = Duration::from_secs(30);
/// Longest token we look at (a bound on work done before the signature is checked).
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// Where the issuer's keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    File(PathBuf),
    Url(String),
}

/// The `[a2a.jwt]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    pub issuer: String,
    pub audience: String,
    pub keys: KeySource,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    pub leeway_s: u64,
}

/// Why a token was refused (said in the 401, logged at debug).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("not a JWT (three base64url segments and a header naming a known algorithm)")]
    Malformed,
    #[error("algorithm {0:?} is not accepted (RS256 or ES256)")]
    Algorithm(String),
    #[error("no key of the issuer matches")]
    UnknownKey,
    #[error("bad signature")]
    Signature,
    #[error("claim {0} is missing or wrong")]
    Claim(&'static str),
    #[error("expired")]
    Expired,
    #[error("not valid yet")]
    NotYetValid,
    #[error("the issuer's key set is unavailable: {0}")]
    KeySet(String),
}

/// One public key of the issuer, as jsonwebtoken verifies with it.
#[derive(Clone)]
struct Key {
    kid: Option<String>,
    /// RS256 for an RSA key, ES256 for a P-256 one: the algorithm comes from our key.
    alg: Algorithm,
    key: DecodingKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// The signing keys of a JWK set (RFC 7517) we can use: RSA, and EC on P-256; encryption keys,
/// other types and entries jsonwebtoken cannot read are skipped (one odd key does not lock the
/// issuer's parties out).
fn parse_key_set(json: &[u8]) -> Result<Vec<Key>, JwtError> {
    let set: Value =
        serde_json::from_slice(json).map_err(|e| JwtError::KeySet(format!("not JSON: {e}")))?;
    let keys = set["keys"]
        .as_array()
        .ok_or_else(|| JwtError::KeySet("no \"keys\" array".into()))?;
    let mut out = Vec::new();
    for k in keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(k.clone()) else {
            continue;
        };
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| *u != PublicKeyUse::Signature)
        {
            continue;
        }
        let declared = jwk.common.key_algorithm;
        let alg = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) if matches!(declared, None | Some(KeyAlgorithm::RS256)) => {
                Algorithm::RS256
            }
            AlgorithmParameters::EllipticCurve(p)
                if p.curve == EllipticCurve::P256
                    && matches!(declared, None | Some(KeyAlgorithm::ES256)) =>
            {
                Algorithm::ES256
            }
            _ => continue,
        };
        if let Ok(key) = DecodingKey::from_jwk(&jwk) {
            out.push(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                key,
            });
        }
    }
    if out.is_empty() {
        return Err(JwtError::KeySet(
            "no RS256 or ES256 signing key in the set".into(),
        ));
    }
    Ok(out)
}

/// The claims we read beyond what jsonwebtoken checks (it checks `iss`, `aud`, `exp`, `nbf`).
#[derive(serde::Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Value,
    #[serde(default)]
    exp: Value,
}

#[derive(Debug, Default)]
struct Cache {
    keys: Vec<Key>,
    /// The last successful fetch.
    fetched: Option<Instant>,
    /// The last attempt, successful or not.
    tried: Option<Instant>,
}

impl Cache {
    fn stale(&self, refresh: Duration) -> bool {
        self.fetched.is_none_or(|t| t.elapsed() >= refresh)
    }

    fn may_fetch(&self, gap: Duration) -> bool {
        self.tried.is_none_or(|t| t.elapsed() >= gap)
    }
}

/// Verifies party JWTs; shared by the bindings.
/// What a valid JWT proves: its subject, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub subject: String,
    /// `exp` plus the tolerated skew, in milliseconds.
    pub expires_at: crate::domain::Timestamp,
}

#[derive(Debug)]
pub struct JwtVerifier {
    settings: JwtSettings,
    http: reqwest::Client,
    cache: Mutex<Cache>,
    /// [`REFRESH`] and [`REFETCH_GAP`] (shorter in tests).
    refresh: Duration,
    refetch_gap: Duration,
}

impl JwtVerifier {
    /// A verifier for `settings`; a key file is read (and must hold a usable key) now.
    pub fn new(settings: JwtSettings, http: reqwest::Client) -> anyhow::Result<JwtVerifier> {
        let mut cache = Cache::default();
        if let KeySource::File(path) = &settings.keys {
            let bytes = std::fs::read(path).map_err(|e| {
                anyhow::anyhow!("Could not read the JWT key set {}: {e}", path.display())
            })?;
            cache.keys = parse_key_set(&bytes)
                .map_err(|e| anyhow::anyhow!("JWT key set {}: {e}", path.display()))?;
        }
        Ok(JwtVerifier {
            settings,
            http,
            cache: Mutex::new(cache),
            refresh: REFRESH,
            refetch_gap: REFETCH_GAP,
        })
    }

    /// Whether a bearer credential is shaped like a JWT (ours start with `lsn_` and have no dots).
    pub fn looks_like_jwt(credential: &str) -> bool {
        credential.bytes().filter(|b| *b == b'.').count() == 2
    }

    /// The subject of a valid token, and when it stops being accepted. jsonwebtoken checks the
    /// signature with the key the header's `kid` names (the algorithm must be the key's: `none`,
    /// HMAC and a key of the other type are refused), `iss`, `aud`, `exp` and `nbf` with the
    /// leeway, all four required but `nbf`.
    pub async fn verify(&self, token: &str) -> Result<Verified, JwtError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(JwtError::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| JwtError::Malformed)?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(JwtError::Algorithm(format!("{:?}", header.alg)));
        }
        let key = self.key(header.kid.as_deref(), header.alg).await?;
        let s = &self.settings;
        let mut validation = Validation::new(key.alg);
        validation.set_issuer(&[&s.issuer]);
        validation.set_audience(&[&s.audience]);
        validation.set_required_spec_claims(&["iss", "aud", "exp"]);
        validation.validate_nbf = true;
        validation.leeway = s.leeway_s;
        let claims = crate::keys::jwt::decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| refusal(e.kind()))?
            .claims;
        // Required and checked as a number by jsonwebtoken already.
        let exp = claims.exp.as_i64().ok_or(JwtError::Claim("exp"))?;
        match claims.sub.as_str() {
            Some(sub) if !sub.is_empty() && sub.len() <= 255 => Ok(Verified {
                subject: sub.to_owned(),
                // Accepted until `exp` plus the leeway: what is held open with it ends then.
                expires_at: crate::domain::Timestamp(
                    exp.saturating_add(s.leeway_s as i64).saturating_mul(1000),
                ),
            }),
            _ => Err(JwtError::Claim("sub")),
        }
    }

    /// The key for a token's `kid` and `alg` (without a `kid`, the only key of that type). Fetches
    /// the set when it is stale, or when the kid is unknown and the last attempt is old enough.
    /// When a refresh fails, the keys fetched before stay in use (an issuer's outage must not lock
    /// its parties out); only with no keys at all is the failure the answer.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<Key, JwtError> {
        let mut cache = self.cache.lock().await;
        let KeySource::Url(url) = &self.settings.keys else {
            return find(&cache.keys, kid, alg)
                .cloned()
                .ok_or(JwtError::UnknownKey);
        };
        if cache.stale(self.refresh) && cache.may_fetch(self.refetch_gap) {
            self.fetch_or_keep(url, &mut cache).await?;
        }
        if let Some(key) = find(&cache.keys, kid, alg) {
            return Ok(key.clone());
        }
        if cache.may_fetch(self.refetch_gap) {
            self.fetch_or_keep(url, &mut cache).await?;
        }
        find(&cache.keys, kid, alg)
            .cloned()
            .ok_or(JwtError::UnknownKey)
    }

    async fn fetch_or_keep(&self, url: &str, cache: &mut Cache) -> Result<(), JwtError> {
        // Every attempt counts, so an unreachable issuer is not asked on every request.
        cache.tried = Some(Instant::now());
        match self.fetch(url).await {
            Ok(keys) => {
                tracing::info!(url, keys = keys.len(), "Fetched the JWT issuer's key set.");
                cache.keys = keys;
                cache.fetched = cache.tried;
                Ok(())
            }
            Err(e) if cache.keys.is_empty() => Err(e),
            Err(e) => {
                tracing::warn!(url, error = %e, "Could not refresh the JWT issuer's key set; the keys fetched before stay in use.");
                Ok(())
            }
        }
    }

    async fn fetch(&self, url: &str) -> Result<Vec<Key>, JwtError> {
        let unavailable = |e: reqwest::Error| JwtError::KeySet(e.to_string());
        let body = self
            .http
            .get(url)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(unavailable)?
            .bytes()
            .await
            .map_err(unavailable)?;
        parse_key_set(&body)
    }
}

/// jsonwebtoken's refusal as ours.
fn refusal(kind: &ErrorKind) -> JwtError {
    match kind {
        ErrorKind::InvalidSignature => JwtError::Signature,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            JwtError::Algorithm("not the key's".into())
        }
        ErrorKind::ExpiredSignature => JwtError::Expired,
        ErrorKind::ImmatureSignature => JwtError::NotYetValid,
        ErrorKind::InvalidIssuer => JwtError::Claim("iss"),
        ErrorKind::InvalidAudience => JwtError::Claim("aud"),
        ErrorKind::MissingRequiredClaim(c) | ErrorKind::InvalidClaimFormat(c) => match c.as_str() {
            "iss" => JwtError::Claim("iss"),
            "aud" => JwtError::Claim("aud"),
            "exp" => JwtError::Claim("exp"),
            "nbf" => JwtError::Claim("nbf"),
            _ => JwtError::Claim("sub"),
        },
        _ => JwtError::Malformed,
    }
}

fn find<'k>(keys: &'k [Key], kid: Option<&str>, alg: Algorithm) -> Option<&'k Key> {
    let mut usable = keys.iter().filter(|k| k.alg == alg);
    match kid {
        Some(kid) => usable.find(|k| k.kid.as_deref() == Some(kid)),
        None => {
            let only = usable.next()?;
            usable.next().is_none().then_some(only)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::ring::{MasterKey, SigningKey};
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::json;

    /// jsonwebtoken checks the times against the system clock: tokens are made around it.
    fn now() -> i64 {
        jsonwebtoken::get_current_timestamp() as i64
    }

    /// An HTTP client (after installing the process's rustls provider, as the server does).
    fn client() -> reqwest::Client {
        crate::net::tls::install_crypto_provider();
        reqwest::Client::builder().build().unwrap()
    }

    fn settings(keys: KeySource) -> JwtSettings {
        JwtSettings {
            issuer: "https://issuer.test".into(),
            audience: "https://liaison.test".into(),
            keys,
            leeway_s: 60,
        }
    }

    /// A verifier over `key`'s public half, and the key.
    fn verifier() -> (JwtVerifier, SigningKey) {
        let master = MasterKey::from_hex(&"11".repeat(32)).unwrap();
        let (key, _) = SigningKey::generate(&master).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        let jwks = json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "EC", "crv": "P-256", "use": "enc", "x": "AA", "y": "AA", "kid": "enc"},
            serde_json::to_value(key.public_jwk()).unwrap(),
        ]});
        std::fs::write(&path, jwks.to_string()).unwrap();
        let v = JwtVerifier::new(settings(KeySource::File(path)), client()).unwrap();
        (v, key)
    }

    fn claims() -> Value {
        json!({
            "iss": "https://issuer.test",
            "aud": ["other", "https://liaison.test"],
            "sub": "partner-7",
            "exp": now() + 300,
            "nbf": now() - 10,
        })
    }

    fn with(mut c: Value, key: &str, v: Value) -> Value {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(key);
        } else {
            c[key] = v;
        }
        c
    }

    #[tokio::test]
    async fn a_valid_token_yields_its_subject() {
        let (v, key) = verifier();
        let token = key.sign_jwt(&claims()).unwrap();
        assert!(JwtVerifier::looks_like_jwt(&token));
        assert!(!JwtVerifier::looks_like_jwt("lsn_abc"));
        let c = claims();
        let verified = v.verify(&token).await.unwrap();
        assert_eq!(verified.subject, "partner-7");
        assert_eq!(
            verified.expires_at.0,
            (c["exp"].as_i64().unwrap() + 60) * 1000,
            "exp plus the leeway"
        );
        // Within the leeway either side.
        let late = key
            .sign_jwt(&with(claims(), "exp", json!(now() - 30)))
            .unwrap();
        assert!(v.verify(&late).await.is_ok());
        let early = key
            .sign_jwt(&with(claims(), "nbf", json!(now() + 30)))
            .unwrap();
        assert!(v.verify(&early).await.is_ok());
        let plain_aud = key
            .sign_jwt(&with(claims(), "aud", json!("https://liaison.test")))
            .unwrap();
        assert!(v.verify(&plain_aud).await.is_ok());
    }

    #[tokio::test]
    async fn wrong_claims_are_refused() {
        let (v, key) = verifier();
        let cases = [
            (
                with(claims(), "iss", json!("https://evil.test")),
                JwtError::Claim("iss"),
            ),
            (
                with(claims(), "aud", json!("other")),
                JwtError::Claim("aud"),
            ),
            (with(claims(), "aud", Value::Null), JwtError::Claim("aud")),
            (with(claims(), "iss", Value::Null), JwtError::Claim("iss")),
            (with(claims(), "iss", json!(7)), JwtError::Claim("iss")),
            (with(claims(), "exp", Value::Null), JwtError::Claim("exp")),
            (with(claims(), "exp", json!(now() - 120)), JwtError::Expired),
            // A time of the wrong type is refused, not skipped (GHSA-h395-gr6q-cpjc).
            (
                with(claims(), "exp", json!("never")),
                JwtError::Claim("exp"),
            ),
            (
                with(claims(), "nbf", json!(now() + 120)),
                JwtError::NotYetValid,
            ),
            (
                with(claims(), "nbf", json!((now() + 9999).to_string())),
                JwtError::Claim("nbf"),
            ),
            (with(claims(), "sub", json!("")), JwtError::Claim("sub")),
            (with(claims(), "sub", json!(7)), JwtError::Claim("sub")),
        ];
        for (c, want) in cases {
            let token = key.sign_jwt(&c).unwrap();
            assert_eq!(v.verify(&token).await.unwrap_err(), want, "{c}");
        }
    }

    #[tokio::test]
    async fn forged_and_malformed_tokens_are_refused() {
        let (v, key) = verifier();
        let token = key.sign_jwt(&claims()).unwrap();
        let (head, rest) = token.split_once('.').unwrap();
        let (_, sig) = rest.rsplit_once('.').unwrap();
        // Claims changed after signing.
        let forged_claims =
            URL_SAFE_NO_PAD.encode(with(claims(), "sub", json!("admin")).to_string());
        let forged = format!("{head}.{forged_claims}.{sig}");
        assert_eq!(v.verify(&forged).await.unwrap_err(), JwtError::Signature);
        let body = rest.split_once('.').unwrap().0;
        // alg none, with or without a signature, is not even a header we read.
        for sig in [sig, ""] {
            let h = URL_SAFE_NO_PAD.encode(json!({"alg": "none", "kid": key.kid()}).to_string());
            let t = format!("{h}.{body}.{sig}");
            assert_eq!(v.verify(&t).await.unwrap_err(), JwtError::Malformed);
        }
        // HS256 signed with the issuer's public key as the HMAC secret (alg confusion).
        let h = URL_SAFE_NO_PAD.encode(json!({"alg": "HS256", "kid": key.kid()}).to_string());
        let public = serde_json::to_vec(&key.public_jwk()).unwrap();
        let mac = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &public),
            format!("{h}.{body}").as_bytes(),
        );
        let t = format!("{h}.{body}.{}", URL_SAFE_NO_PAD.encode(mac.as_ref()));
        assert_eq!(
            v.verify(&t).await.unwrap_err(),
            JwtError::Algorithm("HS256".into())
        );
        // A key id the issuer does not have.
        let h = URL_SAFE_NO_PAD.encode(json!({"alg": "ES256", "kid": "nope"}).to_string());
        let t = format!("{h}.{body}.{sig}");
        assert_eq!(v.verify(&t).await.unwrap_err(), JwtError::UnknownKey);
        // Signed by a key the issuer does not publish, under the issuer's kid.
        let master = MasterKey::from_hex(&"33".repeat(32)).unwrap();
        let (stranger, _) = SigningKey::generate(&master).unwrap();
        let theirs = stranger.sign_jwt(&claims()).unwrap();
        let (_, their_rest) = theirs.split_once('.').unwrap();
        let t = format!("{head}.{their_rest}");
        assert_eq!(v.verify(&t).await.unwrap_err(), JwtError::Signature);
        // RS256 named, but the only key is EC: no key of that algorithm.
        let h = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256"}).to_string());
        let t = format!("{h}.{body}.{sig}");
        assert_eq!(v.verify(&t).await.unwrap_err(), JwtError::UnknownKey);
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            "!!.!!.!!",
            &"a".repeat(MAX_TOKEN_LEN + 1),
        ] {
            assert_eq!(v.verify(bad).await.unwrap_err(), JwtError::Malformed);
        }
    }

    #[test]
    fn key_sets_without_a_usable_key_are_refused() {
        assert!(parse_key_set(b"{}").is_err());
        assert!(parse_key_set(b"not json").is_err());
        assert!(parse_key_set(br#"{"keys":[{"kty":"oct","k":"AA"}]}"#).is_err());
        let rsa =
            parse_key_set(br#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","kid":"r"}]}"#).unwrap();
        assert_eq!(rsa[0].alg, Algorithm::RS256);
        assert_eq!(rsa[0].kid.as_deref(), Some("r"));
        // An RSA key declared for another algorithm is not used.
        assert!(
            parse_key_set(br#"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","alg":"RS512"}]}"#)
                .is_err()
        );
    }

    #[test]
    fn a_missing_key_file_fails_at_start() {
        let err = JwtVerifier::new(
            settings(KeySource::File("/nonexistent/jwks.json".into())),
            client(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/jwks.json"), "{err}");
    }

    /// An issuer's JWKS endpoint on a local port: serves `body`, or 503 while `down`; counts hits.
    struct Issuer {
        url: String,
        body: std::sync::Arc<std::sync::Mutex<String>>,
        down: std::sync::Arc<std::sync::atomic::AtomicBool>,
        hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    async fn issuer(keys: &[&SigningKey]) -> Issuer {
        use std::sync::atomic::Ordering;
        let jwks = |keys: &[&SigningKey]| {
            json!({"keys": keys.iter().map(|k| k.public_jwk()).collect::<Vec<_>>()}).to_string()
        };
        let body = std::sync::Arc::new(std::sync::Mutex::new(jwks(keys)));
        let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (b, d, h) = (body.clone(), down.clone(), hits.clone());
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let (b, d, h) = (b.clone(), d.clone(), h.clone());
                async move {
                    h.fetch_add(1, Ordering::SeqCst);
                    if d.load(Ordering::SeqCst) {
                        Err(axum::http::StatusCode::SERVICE_UNAVAILABLE)
                    } else {
                        Ok(b.lock().unwrap().clone())
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Issuer {
            url,
            body,
            down,
            hits,
        }
    }

    #[tokio::test]
    async fn keys_from_a_url_are_refreshed_rotated_in_and_kept_through_an_outage() {
        use std::sync::atomic::Ordering;
        let master = MasterKey::from_hex(&"22".repeat(32)).unwrap();
        let (old, _) = SigningKey::generate(&master).unwrap();
        let (new, _) = SigningKey::generate(&master).unwrap();
        let idp = issuer(&[&old]).await;
        let mut v = JwtVerifier::new(settings(KeySource::Url(idp.url.clone())), client()).unwrap();
        let hits = || idp.hits.load(Ordering::SeqCst);
        let old_token = old.sign_jwt(&claims()).unwrap();
        let new_token = new.sign_jwt(&claims()).unwrap();

        // Fetched on first use, then served from the cache.
        assert!(v.verify(&old_token).await.is_ok());
        assert!(v.verify(&old_token).await.is_ok());
        assert_eq!(hits(), 1);
        // A kid the cache lacks is not fetched again within the gap.
        assert_eq!(
            v.verify(&new_token).await.unwrap_err(),
            JwtError::UnknownKey
        );
        assert_eq!(hits(), 1);

        // With the gap passed, the issuer's rotated set is fetched for the new kid.
        v.refetch_gap = Duration::ZERO;
        *idp.body.lock().unwrap() =
            json!({"keys": [old.public_jwk(), new.public_jwk()]}).to_string();
        assert!(v.verify(&new_token).await.is_ok());
        assert_eq!(hits(), 2);

        // The issuer goes down when the set is due for a refresh: the cached keys stay in use.
        v.refresh = Duration::ZERO;
        idp.down.store(true, Ordering::SeqCst);
        assert!(v.verify(&old_token).await.is_ok());
        assert!(hits() >= 3, "a refresh was attempted");

        // With nothing cached, an unreachable issuer is the answer.
        let cold = JwtVerifier::new(settings(KeySource::Url(idp.url.clone())), client()).unwrap();
        assert!(matches!(
            cold.verify(&old_token).await.unwrap_err(),
            JwtError::KeySet(_)
        ));
    }
}
