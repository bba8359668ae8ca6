//! OAuth2 client credentials (RFC 6749 §4.4) for remotes that want them: the token is fetched
//! through the outbound client (the token endpoint passes the same address guard), with HTTP
//! Basic client authentication (the method every server must support), and cached until shortly
//! before it expires. A remote that answers 401 makes the client forget the token, so the next
//! call fetches a new one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};

use super::CallError;
use crate::net::outbound::OutboundClient;

/// Largest token response read.
const MAX_TOKEN_RESPONSE: usize = 64 * 1024;
/// Lifetime assumed when the server does not say (`expires_in` is optional).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// A token is renewed this long before it expires (or at 90 % of a shorter lifetime).
const MARGIN: Duration = Duration::from_secs(30);

/// The client-credentials parameters of one remote.
pub(super) struct Grant<'a> {
    pub token_url: &'a str,
    pub client_id: &'a str,
    pub client_secret: &'a str,
    pub scopes: &'a [String],
}

impl Grant<'_> {
    /// Identifies the grant (a change of any parameter is another token).
    fn key(&self) -> String {
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [self.token_url, self.client_id, self.client_secret] {
            digest.update(part.as_bytes());
            digest.update(&[0]);
        }
        for scope in self.scopes {
            digest.update(scope.as_bytes());
            digest.update(&[0]);
        }
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.finish())
    }
}

/// Access tokens by grant, with when to stop using them.
#[derive(Default)]
pub(super) struct TokenCache {
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

impl TokenCache {
    /// A valid access token for `grant`: the cached one, or a new one from the token endpoint.
    pub(super) async fn token(
        &self,
        client: &OutboundClient,
        grant: &Grant<'_>,
    ) -> Result<String, CallError> {
        let key = grant.key();
        if let Some((token, until)) = self.lock().get(&key)
            && Instant::now() < *until
        {
            return Ok(token.clone());
        }
        let (token, lifetime) = fetch(client, grant).await?;
        let margin = MARGIN.min(lifetime / 10);
        self.lock()
            .insert(key, (token.clone(), Instant::now() + lifetime - margin));
        Ok(token)
    }

    /// Drops the cached token of `grant` (the remote refused it).
    pub(super) fn forget(&self, grant: &Grant<'_>) {
        self.lock().remove(&grant.key());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn fetch(
    client: &OutboundClient,
    grant: &Grant<'_>,
) -> Result<(String, Duration), CallError> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        form_encode(grant.client_id),
        form_encode(grant.client_secret)
    ));
    let mut value = HeaderValue::from_str(&format!("Basic {basic}"))
        .map_err(|_| CallError::Credentials("the client id or secret is not valid".into()))?;
    value.set_sensitive(true);
    headers.insert(AUTHORIZATION, value);
    let mut body = "grant_type=client_credentials".to_owned();
    if !grant.scopes.is_empty() {
        body.push_str("&scope=");
        body.push_str(&form_encode(&grant.scopes.join(" ")));
    }
    let answer = client
        .request_bounded(
            reqwest::Method::POST,
            grant.token_url,
            headers,
            Some(body.into_bytes()),
            MAX_TOKEN_RESPONSE,
        )
        .await
        .map_err(|e| {
            CallError::Credentials(format!("the token endpoint {}: {e}", grant.token_url))
        })?;
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    if !(200..300).contains(&answer.status) {
        let error = json["error"].as_str().unwrap_or("no error code");
        return Err(CallError::Credentials(format!(
            "the token endpoint {} answered HTTP {} ({})",
            grant.token_url,
            answer.status,
            super::error::excerpt(error)
        )));
    }
    let token = json["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            CallError::Credentials(format!(
                "the token endpoint {} answered no access_token",
                grant.token_url
            ))
        })?;
    if let Some(kind) = json["token_type"].as_str()
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(CallError::Credentials(format!(
            "the token endpoint {} issued a {} token; liaison sends bearer tokens only",
            grant.token_url,
            super::error::excerpt(kind)
        )));
    }
    let lifetime = json["expires_in"]
        .as_u64()
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_LIFETIME)
        .max(Duration::from_secs(1));
    Ok((token.to_owned(), lifetime))
}

/// `application/x-www-form-urlencoded` of one value (RFC 6749 Appendix B).
fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                (b as char).to_string()
            }
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_encoded_as_rfc_6749_says() {
        assert_eq!(form_encode("a b+c/é"), "a+b%2Bc%2F%C3%A9");
    }
}
