//! Every JWT is issued and verified by the `jsonwebtoken` crate; this module gives it its
//! cryptography on `ring` (the crate's own backends are aws-lc or RustCrypto, a second crypto
//! stack beside the ring rustls and the key ring already use).
//!
//! Only what liaison signs or accepts is provided: ES256 signing (our key ring), ES256 and RS256
//! verification (our keys, an OpenID Connect issuer's). Any other algorithm, HMAC included, is
//! refused by the provider as well as by each caller's `Validation`. Every use goes through
//! [`encode`] and [`decode`], which install the provider first, so no path reaches the crate
//! without it. Depends on no other module of the crate.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::signature::{Error as SignatureError, Signer, Verifier};
use jsonwebtoken::{
    Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey, Header, TokenData,
    Validation,
};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair,
    RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents, UnparsedPublicKey,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// jsonwebtoken's cryptography on ring. No JWK utilities (thumbprints, keys from private keys):
/// the key ring computes its own `kid`s.
static RING: CryptoProvider = CryptoProvider {
    signer_factory: signer,
    verifier_factory: verifier,
    key_utils: KeyUtils::new_unimplemented(),
};

/// Makes [`RING`] the process's provider (once; later calls do nothing).
fn install() {
    // Err only when already installed, which is the point.
    let _ = RING.install_default();
}

/// A signed JWT (compact JWS) of `claims` under `header`.
pub fn encode<T: Serialize>(
    header: &Header,
    claims: &T,
    key: &EncodingKey,
) -> Result<String, Error> {
    install();
    jsonwebtoken::encode(header, claims, key)
}

/// The header and claims of a token whose signature, algorithm and claims pass `validation`.
pub fn decode<T: DeserializeOwned>(
    token: &str,
    key: &DecodingKey,
    validation: &Validation,
) -> Result<TokenData<T>, Error> {
    install();
    jsonwebtoken::decode(token, key, validation)
}

fn signer(alg: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    if *alg != Algorithm::ES256 || key.family() != AlgorithmFamily::Ec {
        return Err(ErrorKind::InvalidAlgorithm.into());
    }
    let pair = EcdsaKeyPair::from_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        key.as_bytes(),
        &SystemRandom::new(),
    )
    .map_err(|_| Error::from(ErrorKind::InvalidEcdsaKey))?;
    Ok(Box::new(Es256Signer(pair)))
}

fn verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    match (alg, key.family()) {
        (Algorithm::ES256, AlgorithmFamily::Ec) | (Algorithm::RS256, AlgorithmFamily::Rsa) => {
            Ok(Box::new(RingVerifier {
                alg: *alg,
                key: key.clone(),
            }))
        }
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    }
}

struct Es256Signer(EcdsaKeyPair);

impl Signer<Vec<u8>> for Es256Signer {
    fn try_sign(&self, message: &[u8]) -> Result<Vec<u8>, SignatureError> {
        self.0
            .sign(&SystemRandom::new(), message)
            .map(|signature| signature.as_ref().to_vec())
            .map_err(|_| SignatureError::new())
    }
}

impl JwtSigner for Es256Signer {
    fn algorithm(&self) -> Algorithm {
        Algorithm::ES256
    }
}

/// ES256 over an uncompressed P-256 point (`0x04 || x || y`, as jsonwebtoken builds it from a
/// JWK), RS256 over a modulus and exponent or a PKCS#1 DER public key.
struct RingVerifier {
    alg: Algorithm,
    key: DecodingKey,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], signature: &Vec<u8>) -> Result<(), SignatureError> {
        let ok = match (self.alg, self.key.kind()) {
            (Algorithm::ES256, DecodingKeyKind::SecretOrDer(point)) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, signature)
                    .is_ok()
            }
            (Algorithm::RS256, DecodingKeyKind::RsaModulusExponent { n, e }) => {
                RsaPublicKeyComponents { n, e }
                    .verify(&RSA_PKCS1_2048_8192_SHA256, message, signature)
                    .is_ok()
            }
            (Algorithm::RS256, DecodingKeyKind::SecretOrDer(der)) => {
                UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, der)
                    .verify(message, signature)
                    .is_ok()
            }
            _ => false,
        };
        ok.then_some(()).ok_or_else(SignatureError::new)
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn es256() -> (EncodingKey, DecodingKey) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        use ring::signature::KeyPair as _;
        (
            EncodingKey::from_ec_der(pkcs8.as_ref()),
            DecodingKey::from_ec_der(pair.public_key().as_ref()),
        )
    }

    fn validation(alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.set_required_spec_claims::<&str>(&[]);
        v.validate_exp = false;
        v.validate_aud = false;
        v
    }

    #[test]
    fn es256_round_trips_and_a_changed_byte_fails() {
        let (enc, dec) = es256();
        let token = encode(&Header::new(Algorithm::ES256), &json!({"a": 1}), &enc).unwrap();
        let data = decode::<Value>(&token, &dec, &validation(Algorithm::ES256)).unwrap();
        assert_eq!(data.claims["a"], 1);
        let mut forged = token.clone();
        let at = forged.rfind('.').unwrap() + 3;
        let c = if &forged[at..=at] == "A" { "B" } else { "A" };
        forged.replace_range(at..=at, c);
        assert_eq!(
            decode::<Value>(&forged, &dec, &validation(Algorithm::ES256))
                .unwrap_err()
                .kind(),
            &ErrorKind::InvalidSignature
        );
    }

    #[test]
    fn only_es256_signs_and_hmac_never_verifies() {
        let (enc, dec) = es256();
        for alg in [Algorithm::HS256, Algorithm::ES384, Algorithm::RS256] {
            assert!(
                encode(&Header::new(alg), &json!({}), &enc).is_err(),
                "{alg:?}"
            );
        }
        let hmac = EncodingKey::from_secret(b"secret").unwrap();
        assert!(encode(&Header::new(Algorithm::HS256), &json!({}), &hmac).is_err());
        // An HS256 token checked with an HMAC key: the provider has no HMAC.
        let secret = DecodingKey::from_secret(b"secret").unwrap();
        let token = "eyJhbGciOiJIUzI1NiJ9.e30.c2ln";
        assert!(decode::<Value>(token, &secret, &validation(Algorithm::HS256)).is_err());
        // An ES256 key asked to verify RS256.
        assert!(verifier(&Algorithm::RS256, &dec).is_err());
    }
}
