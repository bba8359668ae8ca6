//! Signing keys for the Agent Card (and later push-notification JWTs): ES256 (ECDSA P-256), the
//! private part sealed with AES-256-GCM under the master key, the public parts published as a JWKS.
//!
//! A [`SealedKey`] is plain data with no secret in clear: the store keeps the ring's records (one
//! row shared by every replica, see `app::shared_key_ring`) and [`KeyRing::open`] unseals them.
//! [`load_records`] reads the `<data-dir>/signing-keys.json` of earlier versions, to import it.
//! JWTs are signed through `jsonwebtoken` ([`super::jwt`], on this same ring); the card's JWS over
//! JCS signs with [`SigningKey::sign`] directly. Depends on no other module of the crate but
//! [`super::jwt`].

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Name of the master key file, in the data directory (the same file `app` creates).
pub const MASTER_KEY_FILE: &str = "master.key";
/// Environment variable that overrides the master key file.
pub const MASTER_KEY_ENV: &str = "LIAISON_MASTER_KEY";
/// Name of the file holding the sealed signing keys, in the data directory.
pub const KEYS_FILE: &str = "signing-keys.json";
/// The only algorithm we sign with.
pub const ALG_ES256: &str = "ES256";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("The master key is missing: set {MASTER_KEY_ENV} or create {0}")]
    MasterKeyMissing(PathBuf),
    #[error("The master key must be 64 hexadecimal characters (32 bytes)")]
    MasterKeyMalformed,
    #[error("The signing key {kid} cannot be opened with this master key")]
    Unseal { kid: String },
    #[error("The signing key record {kid} is malformed: {why}")]
    Malformed { kid: String, why: &'static str },
    #[error("No system randomness")]
    Randomness,
    #[error("Could not sign a JWT with the key {kid}: {why}")]
    Sign { kid: String, why: String },
    #[error("The key ring holds no key")]
    Empty,
    #[error("Could not read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("The key file {path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// The 32-byte key that seals signing keys. Never logged, never serialised.
pub struct MasterKey([u8; 32]);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

impl MasterKey {
    /// The key from `LIAISON_MASTER_KEY` if set, else from `<data_dir>/master.key`.
    pub fn load(data_dir: &Path) -> Result<MasterKey, KeyError> {
        if let Ok(hex) = std::env::var(MASTER_KEY_ENV) {
            return MasterKey::from_hex(&hex);
        }
        let path = data_dir.join(MASTER_KEY_FILE);
        match std::fs::read_to_string(&path) {
            Ok(hex) => MasterKey::from_hex(&hex),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Err(KeyError::MasterKeyMissing(path))
            }
            Err(source) => Err(KeyError::Io { path, source }),
        }
    }

    /// Parses 64 hexadecimal characters (surrounding whitespace ignored).
    pub fn from_hex(hex: &str) -> Result<MasterKey, KeyError> {
        let hex = hex.trim().as_bytes();
        if hex.len() != 64 {
            return Err(KeyError::MasterKeyMalformed);
        }
        let mut key = [0u8; 32];
        for (byte, pair) in key.iter_mut().zip(hex.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).map_err(|_| KeyError::MasterKeyMalformed)?;
            *byte = u8::from_str_radix(text, 16).map_err(|_| KeyError::MasterKeyMalformed)?;
        }
        Ok(MasterKey(key))
    }

    /// A 32-byte value derived from the master key for one `purpose` and `context`
    /// (HMAC-SHA256 over both, the purpose ending at a NUL): the same inputs always give the same
    /// value, which nobody without the master key can compute. For secrets that must be the same
    /// each time they are made but are never stored.
    pub(crate) fn derive(&self, purpose: &str, context: &[u8]) -> [u8; 32] {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.0);
        let mut message = Vec::with_capacity(purpose.len() + 1 + context.len());
        message.extend_from_slice(purpose.as_bytes());
        message.push(0);
        message.extend_from_slice(context);
        let mut out = [0u8; 32];
        out.copy_from_slice(ring::hmac::sign(&key, &message).as_ref());
        out
    }

    fn aead(&self) -> LessSafeKey {
        // 32 bytes is always a valid AES-256 key.
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.0).expect("32-byte AES-256 key"))
    }

    /// AES-256-GCM with a random nonce; `aad` binds the ciphertext to its record.
    pub(crate) fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, KeyError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| KeyError::Randomness)?;
        let mut in_out = plaintext.to_vec();
        self.aead()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut in_out,
            )
            .map_err(|_| KeyError::Randomness)?;
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&in_out);
        Ok(sealed)
    }

    pub(crate) fn open(&self, sealed: &[u8], aad: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut in_out = ciphertext.to_vec();
        let plain = self
            .aead()
            .open_in_place(nonce, Aad::from(aad), &mut in_out)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// A signing key as persisted: the public key in clear, the PKCS#8 private key sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedKey {
    /// RFC 7638 JWK thumbprint of the public key (base64url SHA-256).
    pub kid: String,
    /// Always `ES256` for now.
    pub alg: String,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// base64url of the uncompressed SEC1 point (`04 || X || Y`).
    pub public_key: String,
    /// base64 of `nonce || AES-256-GCM(PKCS#8) || tag`, with the kid as associated data.
    pub sealed_private_key: String,
    /// RFC 3339; set when a newer key replaced this one: it keeps co-signing (and stays in the
    /// JWKS) until then, and is dropped after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retire_after: Option<String>,
    /// RFC 3339; set when an admin retired this key before its overlap ended (its
    /// `retire_after` is then that same moment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<String>,
}

/// One usable signing key.
pub struct SigningKey {
    kid: String,
    pair: EcdsaKeyPair,
    /// The same private key, for JWTs signed through jsonwebtoken.
    jwt: jsonwebtoken::EncodingKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A fresh P-256 key and its sealed record, created now.
    pub fn generate(master: &MasterKey) -> Result<(SigningKey, SealedKey), KeyError> {
        SigningKey::generate_at(master, chrono::Utc::now())
    }

    /// A fresh P-256 key and its sealed record, created at `now`.
    pub fn generate_at(
        master: &MasterKey,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(SigningKey, SealedKey), KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| KeyError::Randomness)?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| KeyError::Randomness)?;
        let public = pair.public_key().as_ref().to_vec();
        let kid = thumbprint(&public).ok_or(KeyError::Malformed {
            kid: String::new(),
            why: "public key is not an uncompressed P-256 point",
        })?;
        let sealed = master.seal(pkcs8.as_ref(), kid.as_bytes())?;
        let record = SealedKey {
            kid: kid.clone(),
            alg: ALG_ES256.to_owned(),
            created_at: rfc3339(now),
            public_key: URL_SAFE_NO_PAD.encode(&public),
            sealed_private_key: STANDARD.encode(sealed),
            retire_after: None,
            retired_at: None,
        };
        let jwt = jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref());
        Ok((SigningKey { kid, pair, jwt }, record))
    }

    /// Opens a sealed record with the master key.
    pub fn unseal(record: &SealedKey, master: &MasterKey) -> Result<SigningKey, KeyError> {
        let malformed = |why| KeyError::Malformed {
            kid: record.kid.clone(),
            why,
        };
        if record.alg != ALG_ES256 {
            return Err(malformed("unsupported algorithm"));
        }
        let sealed = STANDARD
            .decode(&record.sealed_private_key)
            .map_err(|_| malformed("sealed_private_key is not base64"))?;
        let pkcs8 =
            master
                .open(&sealed, record.kid.as_bytes())
                .ok_or_else(|| KeyError::Unseal {
                    kid: record.kid.clone(),
                })?;
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            &pkcs8,
            &SystemRandom::new(),
        )
        .map_err(|_| malformed("not a P-256 PKCS#8 key"))?;
        let public = pair.public_key().as_ref();
        if URL_SAFE_NO_PAD.encode(public) != record.public_key
            || thumbprint(public).as_deref() != Some(record.kid.as_str())
        {
            return Err(malformed(
                "public key or kid does not match the private key",
            ));
        }
        Ok(SigningKey {
            kid: record.kid.clone(),
            pair,
            jwt: jsonwebtoken::EncodingKey::from_ec_der(&pkcs8),
        })
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// ES256 signature in JWS form: the 64-byte `r || s`.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let signature = self
            .pair
            .sign(&SystemRandom::new(), message)
            .map_err(|_| KeyError::Randomness)?;
        Ok(signature.as_ref().to_vec())
    }

    /// A JWT (compact JWS) over `claims`, header `{"alg":"ES256","kid":…,"typ":"JWT"}`.
    pub fn sign_jwt(&self, claims: &serde_json::Value) -> Result<String, KeyError> {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        super::jwt::encode(&header, claims, &self.jwt).map_err(|e| KeyError::Sign {
            kid: self.kid.clone(),
            why: e.to_string(),
        })
    }

    /// The public key as a JWK (with `kid`, `use`, `alg`).
    pub fn public_jwk(&self) -> Jwk {
        Jwk::from_point(&self.kid, self.pair.public_key().as_ref())
            .expect("ring yields an uncompressed P-256 point")
    }
}

/// A public P-256 key in JWK form (RFC 7517/7518).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    pub kty: String,
    pub crv: String,
    pub x: String,
    pub y: String,
    pub kid: String,
    #[serde(rename = "use", default, skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
}

impl Jwk {
    fn from_point(kid: &str, point: &[u8]) -> Option<Jwk> {
        let (x, y) = split_point(point)?;
        Some(Jwk {
            kty: "EC".to_owned(),
            crv: "P-256".to_owned(),
            x: URL_SAFE_NO_PAD.encode(x),
            y: URL_SAFE_NO_PAD.encode(y),
            kid: kid.to_owned(),
            use_: Some("sig".to_owned()),
            alg: Some(ALG_ES256.to_owned()),
        })
    }

    /// Checks an ES256 signature (`r || s`) made by this key.
    pub fn verify_es256(&self, message: &[u8], signature: &[u8]) -> bool {
        if self.kty != "EC" || self.crv != "P-256" {
            return false;
        }
        let (Ok(x), Ok(y)) = (
            URL_SAFE_NO_PAD.decode(&self.x),
            URL_SAFE_NO_PAD.decode(&self.y),
        ) else {
            return false;
        };
        if x.len() != 32 || y.len() != 32 {
            return false;
        }
        let mut point = Vec::with_capacity(65);
        point.push(0x04);
        point.extend_from_slice(&x);
        point.extend_from_slice(&y);
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
            .verify(message, signature)
            .is_ok()
    }
}

/// A JSON Web Key Set, as served at `/.well-known/jwks.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

impl Jwks {
    pub fn find(&self, kid: &str) -> Option<&Jwk> {
        self.keys.iter().find(|key| key.kid == kid)
    }

    /// The key a JWT's header names, for jsonwebtoken to verify it with: `None` when the header
    /// is unreadable, names another algorithm than ES256, or a `kid` not in the set.
    pub fn jwt_key(&self, token: &str) -> Option<jsonwebtoken::DecodingKey> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        if header.alg != jsonwebtoken::Algorithm::ES256 {
            return None;
        }
        let key = self.find(header.kid.as_deref()?)?;
        if key.kty != "EC" || key.crv != "P-256" {
            return None;
        }
        jsonwebtoken::DecodingKey::from_ec_components(&key.x, &key.y).ok()
    }
}

/// The keys in use: the newest signs; all are published (rotation overlap comes later).
#[derive(Debug)]
pub struct KeyRing {
    /// Newest first.
    keys: Vec<SigningKey>,
}

impl KeyRing {
    /// Opens sealed records (any order; the newest `created_at` becomes the signer).
    pub fn open(records: &[SealedKey], master: &MasterKey) -> Result<KeyRing, KeyError> {
        // Newest first; of two created in the same second, the later record is the newer.
        let mut sorted: Vec<(usize, &SealedKey)> = records.iter().enumerate().collect();
        sorted.sort_by(|(ia, a), (ib, b)| (&b.created_at, ib).cmp(&(&a.created_at, ia)));
        let keys = sorted
            .into_iter()
            .map(|(_, record)| SigningKey::unseal(record, master))
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(KeyRing { keys })
    }

    /// The key that signs from now on.
    pub fn signer(&self) -> &SigningKey {
        &self.keys[0]
    }

    /// Every key, newest first.
    pub fn keys(&self) -> &[SigningKey] {
        &self.keys
    }

    /// The public keys of the ring.
    pub fn jwks(&self) -> Jwks {
        Jwks {
            keys: self.keys.iter().map(SigningKey::public_jwk).collect(),
        }
    }
}

/// How long a replaced key keeps co-signing by default (SPEC §10).
pub const ROTATION_OVERLAP: chrono::TimeDelta = chrono::TimeDelta::days(7);

/// The records still in use at `now` (not past their `retire_after`).
pub fn live(records: &[SealedKey], now: chrono::DateTime<chrono::Utc>) -> Vec<SealedKey> {
    let now = rfc3339(now);
    records
        .iter()
        .filter(|record| {
            record
                .retire_after
                .as_ref()
                .is_none_or(|until| *until > now)
        })
        .cloned()
        .collect()
}

/// `keys rotate` on persisted records: a new key signs from `now` on; every key that was signing
/// keeps co-signing until `now + overlap`. Returns the new record (already appended).
pub fn rotate(
    records: &mut Vec<SealedKey>,
    master: &MasterKey,
    now: chrono::DateTime<chrono::Utc>,
    overlap: chrono::TimeDelta,
) -> Result<SealedKey, KeyError> {
    let until = rfc3339(now + overlap);
    for record in records.iter_mut() {
        if record.retire_after.is_none() {
            record.retire_after = Some(until.clone());
        }
    }
    let (_, record) = SigningKey::generate_at(master, now)?;
    records.push(record.clone());
    Ok(record)
}

/// How long a retired key stays listed (its id, dates and state, never its private part) after
/// it left the key set; then it is gone from the store too.
pub const RETIRED_LISTED: chrono::TimeDelta = chrono::TimeDelta::days(30);

/// When a retired record stops being listed: [`RETIRED_LISTED`] after it retired.
pub fn listed_until(record: &SealedKey) -> Option<String> {
    let retired = chrono::DateTime::parse_from_rfc3339(record.retire_after.as_deref()?).ok()?;
    Some(rfc3339(
        retired.with_timezone(&chrono::Utc) + RETIRED_LISTED,
    ))
}

/// The records a change keeps at `now`: the live ones as they are, and the ones retired less
/// than [`RETIRED_LISTED`] ago without their private part (nothing can sign with them again).
pub fn kept(records: &[SealedKey], now: chrono::DateTime<chrono::Utc>) -> Vec<SealedKey> {
    let live = live(records, now);
    let shown_from = rfc3339(now);
    let mut kept = Vec::with_capacity(records.len());
    for record in records {
        if live.iter().any(|l| l.kid == record.kid) {
            kept.push(record.clone());
        } else if listed_until(record).is_some_and(|until| until > shown_from) {
            kept.push(SealedKey {
                sealed_private_key: String::new(),
                ..record.clone()
            });
        }
    }
    kept
}

/// The records retired at `now` and still listed, newest first.
pub fn retired(records: &[SealedKey], now: chrono::DateTime<chrono::Utc>) -> Vec<SealedKey> {
    let live = live(records, now);
    let mut retired: Vec<SealedKey> = kept(records, now)
        .into_iter()
        .filter(|r| !live.iter().any(|l| l.kid == r.kid))
        .collect();
    retired.sort_by(|a, b| b.retire_after.cmp(&a.retire_after));
    retired
}

/// `keys retire KID`: takes a key out of the key set at `now`, before its overlap ends. The
/// newest key cannot be retired (rotate first), so a ring never ends up empty; the record stays
/// listed as retired (see [`kept`]).
pub fn retire(
    records: &mut [SealedKey],
    kid: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), RetireError> {
    let index = records
        .iter()
        .position(|record| record.kid == kid)
        .ok_or(RetireError::Unknown)?;
    if !live(records, now).iter().any(|r| r.kid == kid) {
        return Err(RetireError::Retired);
    }
    let newest = records
        .iter()
        .enumerate()
        .max_by(|(ia, a), (ib, b)| (&a.created_at, ia).cmp(&(&b.created_at, ib)))
        .map(|(i, _)| i);
    if newest == Some(index) {
        return Err(RetireError::Signing);
    }
    let at = rfc3339(now);
    let record = &mut records[index];
    record.retire_after = Some(at.clone());
    record.retired_at = Some(at);
    record.sealed_private_key = String::new();
    Ok(())
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RetireError {
    #[error("No signing key has this kid")]
    Unknown,
    #[error("This key signs now; rotate to a new key before retiring it")]
    Signing,
    #[error("This key is retired already")]
    Retired,
}

/// Reads `<data_dir>/signing-keys.json`, where versions before the shared ring kept the keys (no
/// file: no records). Start-up imports them into the store so the card keeps its key id.
pub fn load_records(data_dir: &Path) -> Result<Vec<SealedKey>, KeyError> {
    let path = data_dir.join(KEYS_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).map_err(|source| KeyError::Json { path, source })
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(KeyError::Io { path, source }),
    }
}

fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `(X, Y)` of an uncompressed SEC1 P-256 point.
fn split_point(point: &[u8]) -> Option<(&[u8], &[u8])> {
    match point {
        [0x04, rest @ ..] if rest.len() == 64 => Some(rest.split_at(32)),
        _ => None,
    }
}

/// RFC 7638 thumbprint: base64url SHA-256 of `{"crv","kty","x","y"}` in canonical form.
fn thumbprint(point: &[u8]) -> Option<String> {
    let (x, y) = split_point(point)?;
    let members = json!({
        "crv": "P-256",
        "kty": "EC",
        "x": URL_SAFE_NO_PAD.encode(x),
        "y": URL_SAFE_NO_PAD.encode(y),
    });
    let canonical = serde_json_canonicalizer::to_vec(&members).ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &canonical);
    Some(URL_SAFE_NO_PAD.encode(digest.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master() -> MasterKey {
        MasterKey::from_hex(&"ab".repeat(32)).unwrap()
    }

    #[test]
    fn master_key_must_be_64_hex_characters() {
        assert!(MasterKey::from_hex(&format!("{}\n", "0f".repeat(32))).is_ok());
        assert!(matches!(
            MasterKey::from_hex("abcd"),
            Err(KeyError::MasterKeyMalformed)
        ));
        assert!(matches!(
            MasterKey::from_hex(&"zz".repeat(32)),
            Err(KeyError::MasterKeyMalformed)
        ));
    }

    #[test]
    fn sealed_key_round_trips_and_signs() {
        let (key, record) = SigningKey::generate(&master()).unwrap();
        let reopened = SigningKey::unseal(&record, &master()).unwrap();
        assert_eq!(reopened.kid(), key.kid());
        let signature = reopened.sign(b"payload").unwrap();
        assert_eq!(signature.len(), 64);
        assert!(key.public_jwk().verify_es256(b"payload", &signature));
        assert!(!key.public_jwk().verify_es256(b"payloaD", &signature));
    }

    #[test]
    fn sealed_key_does_not_open_under_another_master_key() {
        let (_, record) = SigningKey::generate(&master()).unwrap();
        let other = MasterKey::from_hex(&"cd".repeat(32)).unwrap();
        assert!(matches!(
            SigningKey::unseal(&record, &other),
            Err(KeyError::Unseal { .. })
        ));
    }

    #[test]
    fn sealed_key_is_bound_to_its_kid() {
        let (_, mut record) = SigningKey::generate(&master()).unwrap();
        let (_, other) = SigningKey::generate(&master()).unwrap();
        record.kid = other.kid;
        assert!(SigningKey::unseal(&record, &master()).is_err());
    }

    #[test]
    fn private_key_is_not_stored_in_clear() {
        let (_, record) = SigningKey::generate(&master()).unwrap();
        let json = serde_json::to_string(&record).unwrap();
        assert!(!json.contains("BEGIN"));
        let sealed = STANDARD.decode(&record.sealed_private_key).unwrap();
        // nonce + PKCS#8 of a P-256 key (138 bytes) + tag
        assert_eq!(sealed.len(), NONCE_LEN + 138 + 16);
    }

    #[test]
    fn kid_is_the_rfc7638_thumbprint() {
        // RFC 7638 §3.1 works an RSA example; for EC the members are crv, kty, x, y. Recompute
        // from the published JWK to check the member set and order.
        let (key, _) = SigningKey::generate(&master()).unwrap();
        let jwk = key.public_jwk();
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk.x, jwk.y
        );
        let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
        assert_eq!(jwk.kid, URL_SAFE_NO_PAD.encode(digest.as_ref()));
    }

    fn at(text: &str) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn rotation_keeps_the_old_key_co_signing_for_the_overlap() {
        let (_, first) = SigningKey::generate_at(&master(), at("2026-01-01T00:00:00Z")).unwrap();
        let mut records = vec![first.clone()];
        let new = rotate(
            &mut records,
            &master(),
            at("2026-03-01T00:00:00Z"),
            ROTATION_OVERLAP,
        )
        .unwrap();
        assert_eq!(
            records[0].retire_after.as_deref(),
            Some("2026-03-08T00:00:00Z")
        );
        assert_eq!(records[1].retire_after, None);

        let during = KeyRing::open(&live(&records, at("2026-03-07T23:59:59Z")), &master()).unwrap();
        assert_eq!(during.signer().kid(), new.kid);
        assert_eq!(
            during.keys().len(),
            2,
            "the old key still co-signs and is published"
        );

        let after = KeyRing::open(&live(&records, at("2026-03-08T00:00:00Z")), &master()).unwrap();
        assert_eq!(after.keys().len(), 1);
        assert_eq!(after.signer().kid(), new.kid);
    }

    #[test]
    fn rotating_twice_in_one_second_still_signs_with_the_newest() {
        let now = at("2026-03-01T00:00:00Z");
        let (_, first) = SigningKey::generate_at(&master(), now).unwrap();
        let mut records = vec![first];
        let second = rotate(&mut records, &master(), now, ROTATION_OVERLAP).unwrap();
        let third = rotate(&mut records, &master(), now, ROTATION_OVERLAP).unwrap();
        let ring = KeyRing::open(&records, &master()).unwrap();
        assert_eq!(ring.signer().kid(), third.kid);
        assert_eq!(records[1].kid, second.kid);
        assert!(records[1].retire_after.is_some());
    }

    #[test]
    fn retire_removes_an_old_key_but_never_the_signing_one() {
        let (_, first) = SigningKey::generate_at(&master(), at("2026-01-01T00:00:00Z")).unwrap();
        let mut records = vec![first.clone()];
        let now = at("2026-02-02T00:00:00Z");
        assert_eq!(
            retire(&mut records, &first.kid, now),
            Err(RetireError::Signing)
        );
        let new = rotate(
            &mut records,
            &master(),
            at("2026-02-01T00:00:00Z"),
            ROTATION_OVERLAP,
        )
        .unwrap();
        assert_eq!(retire(&mut records, "nope", now), Err(RetireError::Unknown));
        assert_eq!(retire(&mut records, &first.kid, now), Ok(()));
        assert_eq!(
            retire(&mut records, &first.kid, now),
            Err(RetireError::Retired)
        );
        let ring = live(&records, now);
        assert_eq!(ring.len(), 1);
        assert_eq!(ring[0].kid, new.kid);
        // Listed as retired, without its private part, for RETIRED_LISTED; then gone.
        let shown = retired(&records, now);
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].kid, first.kid);
        assert_eq!(shown[0].retired_at.as_deref(), Some("2026-02-02T00:00:00Z"));
        assert!(kept(&records, now)[0].sealed_private_key.is_empty());
        assert_eq!(
            listed_until(&shown[0]).as_deref(),
            Some("2026-03-04T00:00:00Z")
        );
        assert_eq!(kept(&records, at("2026-03-04T00:00:00Z")).len(), 1);
        assert!(retired(&records, at("2026-03-04T00:00:00Z")).is_empty());
    }

    #[test]
    fn a_key_whose_overlap_ended_is_listed_as_retired_without_its_private_part() {
        let (_, first) = SigningKey::generate_at(&master(), at("2026-01-01T00:00:00Z")).unwrap();
        let mut records = vec![first.clone()];
        rotate(
            &mut records,
            &master(),
            at("2026-02-01T00:00:00Z"),
            ROTATION_OVERLAP,
        )
        .unwrap();
        let later = at("2026-02-09T00:00:00Z");
        let shown = retired(&records, later);
        assert_eq!(shown.len(), 1);
        assert_eq!(
            shown[0].retired_at, None,
            "its overlap ended; nobody retired it"
        );
        let kept = kept(&records, later);
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().any(|r| r.sealed_private_key.is_empty()));
        assert!(KeyRing::open(&live(&kept, later), &master()).is_ok());
    }

    #[test]
    fn newest_key_signs() {
        let (_, mut old) = SigningKey::generate(&master()).unwrap();
        let (_, mut new) = SigningKey::generate(&master()).unwrap();
        old.created_at = "2026-01-01T00:00:00Z".into();
        new.created_at = "2026-06-01T00:00:00Z".into();
        let ring = KeyRing::open(&[old.clone(), new.clone()], &master()).unwrap();
        assert_eq!(ring.signer().kid(), new.kid);
        assert_eq!(ring.jwks().keys.len(), 2);
        assert!(ring.jwks().find(&old.kid).is_some());
    }
}
