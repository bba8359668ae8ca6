//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the base64 part of a `whsec_` secret (one
//! per secret; a header may carry several, space-separated).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The `webhook-signature` header value; `None` when `secret` is not a `whsec_` secret.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix("whsec_")?).ok()?;
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    Some(format!("v1,{}", STANDARD.encode(ctx.sign().as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_the_standard_webhooks_test_vector() {
        // The example of the Standard Webhooks specification (and its reference libraries' tests).
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(secret, id, 1614265330, body).as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
        assert_eq!(sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", id, 1, body), None);
    }
}
