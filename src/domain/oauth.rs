//! OAuth 2.1 for MCP clients (SPEC §7): the pure rules of liaison's authorization server — PKCE
//! (RFC 7636, S256 only), how a redirect URI a client registered matches the one it presents
//! (exact, except the port of a loopback one: RFC 8252 §7.3), which redirect URIs a client may
//! register, and the errors the RFCs name. No I/O; the service applies them.

use std::fmt;

use base64::Engine as _;

/// An OAuth error code (RFC 6749 §5.2 and §4.1.2.1, RFC 7591 §3.2.2, RFC 8707 §2, RFC 7009 §2.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthErrorCode {
    InvalidRequest,
    InvalidClient,
    InvalidGrant,
    UnauthorizedClient,
    UnsupportedGrantType,
    UnsupportedResponseType,
    UnsupportedTokenType,
    InvalidScope,
    InvalidTarget,
    AccessDenied,
    InvalidRedirectUri,
    InvalidClientMetadata,
    ServerError,
    TemporarilyUnavailable,
}

impl OAuthErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::UnauthorizedClient => "unauthorized_client",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::UnsupportedResponseType => "unsupported_response_type",
            Self::UnsupportedTokenType => "unsupported_token_type",
            Self::InvalidScope => "invalid_scope",
            Self::InvalidTarget => "invalid_target",
            Self::AccessDenied => "access_denied",
            Self::InvalidRedirectUri => "invalid_redirect_uri",
            Self::InvalidClientMetadata => "invalid_client_metadata",
            Self::ServerError => "server_error",
            Self::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }

    /// The HTTP status of this error on the token, registration and revocation endpoints.
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidClient => 401,
            Self::ServerError => 500,
            Self::TemporarilyUnavailable => 429,
            _ => 400,
        }
    }
}

impl fmt::Display for OAuthErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An OAuth refusal: the code the RFCs name and a sentence saying what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub code: OAuthErrorCode,
    pub description: String,
    /// Seconds to wait before trying again (a registration flood).
    pub retry_after_s: Option<u64>,
}

impl OAuthError {
    pub fn new(code: OAuthErrorCode, description: impl Into<String>) -> Self {
        OAuthError {
            code,
            description: description.into(),
            retry_after_s: None,
        }
    }
    pub fn request(description: impl Into<String>) -> Self {
        Self::new(OAuthErrorCode::InvalidRequest, description)
    }
    pub fn grant(description: impl Into<String>) -> Self {
        Self::new(OAuthErrorCode::InvalidGrant, description)
    }
}

impl fmt::Display for OAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.description)
    }
}

/// Whether `verifier` has the syntax RFC 7636 §4.1 gives a `code_verifier`: 43–128 characters of
/// `A-Z a-z 0-9 - . _ ~`.
pub fn valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// Whether `challenge` has the shape of an S256 `code_challenge`: the base64url (no padding) of
/// a SHA-256 digest, 43 characters.
pub fn valid_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(challenge)
            .is_ok_and(|d| d.len() == 32)
}

/// The S256 challenge of `verifier` (RFC 7636 §4.2).
pub fn s256(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// Whether `verifier` is the one `challenge` was made from (compared in constant time).
pub fn verifier_matches(verifier: &str, challenge: &str) -> bool {
    let made = s256(verifier);
    valid_verifier(verifier)
        && made.len() == challenge.len()
        && made
            .bytes()
            .zip(challenge.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// A loopback redirect URI (`http://127.0.0.1…`, `http://[::1]…`, `http://localhost…`): its
/// parts without the port, for the port-agnostic match of RFC 8252 §7.3.
fn loopback_without_port(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix("http://")?;
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        format!("[{host}]")
    } else {
        authority.split(':').next()?.to_owned()
    };
    let port = authority[host.len()..].strip_prefix(':');
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    matches!(host.as_str(), "127.0.0.1" | "[::1]" | "localhost").then(|| (host, path.to_owned()))
}

/// Whether a client that registered `registered` may be sent back to `presented`: the same
/// string, or — for a loopback `http` URI — the same but for the port (native apps listen on
/// a port of their choosing, RFC 8252 §7.3).
pub fn redirect_matches(registered: &str, presented: &str) -> bool {
    if registered == presented {
        return true;
    }
    match (
        loopback_without_port(registered),
        loopback_without_port(presented),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Longest redirect URI a client may register, in bytes.
pub const MAX_REDIRECT_URI_BYTES: usize = 2_000;

/// Why a redirect URI cannot be registered, if it cannot: it must be absolute, without a
/// fragment, and `https`, loopback `http`, or a private-use scheme of a native app
/// (`com.example.app:/callback`, RFC 8252 §7.1); never `http` to another host, nor a scheme a
/// browser would run (`javascript:`, `data:`, `file:`, `vbscript:`, `about:`, `blob:`).
pub fn redirect_uri_problem(uri: &str) -> Option<String> {
    if uri.is_empty() || uri.len() > MAX_REDIRECT_URI_BYTES {
        return Some(format!(
            "a redirect URI is 1-{MAX_REDIRECT_URI_BYTES} bytes"
        ));
    }
    if uri.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Some(format!("{uri:?} holds spaces or control characters"));
    }
    if uri.contains('#') {
        return Some(format!("{uri:?} has a fragment (RFC 6749 §3.1.2)"));
    }
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Some(format!("{uri:?} is not an absolute URI"));
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme.is_empty()
        || !scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    {
        return Some(format!("{uri:?} is not an absolute URI"));
    }
    match scheme.as_str() {
        "https" => {
            let host = rest.strip_prefix("//").unwrap_or("");
            (host.is_empty() || host.starts_with('/'))
                .then(|| format!("{uri:?} names no host"))
        }
        "http" => loopback_without_port(uri).is_none().then(|| {
            format!("{uri:?}: plain http is allowed only to a loopback address (127.0.0.1, [::1], localhost)")
        }),
        "javascript" | "data" | "file" | "vbscript" | "about" | "blob" | "ftp" | "ws" | "wss" => {
            Some(format!("{uri:?}: the scheme {scheme} cannot be a redirect URI"))
        }
        _ => (rest.is_empty()).then(|| format!("{uri:?} has nothing after its scheme")),
    }
}

/// The origin a browser sends a form to when redirected to `uri` (for the consent page's
/// `form-action`): `scheme://authority` for http(s), `scheme:` for a private-use scheme.
pub fn redirect_origin(uri: &str) -> String {
    match uri.split_once("://") {
        Some((scheme, rest)) => {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            format!("{scheme}://{authority}")
        }
        None => match uri.split_once(':') {
            Some((scheme, _)) => format!("{scheme}:"),
            None => String::new(),
        },
    }
}

/// `uri` with `params` added to its query (form-encoded), as a redirect back to a client.
pub fn with_query(uri: &str, params: &[(&str, &str)]) -> String {
    let mut out = uri.to_owned();
    let mut sep = if uri.contains('?') { '&' } else { '?' };
    for (k, v) in params {
        out.push(sep);
        out.push_str(&form_encode(k));
        out.push('=');
        out.push_str(&form_encode(v));
        sep = '&';
    }
    out
}

/// Percent-encodes everything but the unreserved characters (RFC 3986 §2.3).
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256_matches_the_rfc_example_and_nothing_else() {
        // RFC 7636 Appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert_eq!(s256(verifier), challenge);
        assert!(valid_challenge(challenge));
        assert!(verifier_matches(verifier, challenge));
        assert!(!verifier_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK",
            challenge
        ));
        // A plain challenge (the verifier itself) never matches.
        assert!(!verifier_matches(verifier, verifier));
        assert!(!valid_verifier("short"));
        assert!(!valid_verifier(&"a".repeat(129)));
        assert!(!valid_verifier(&format!("{}!", "a".repeat(50))));
        assert!(!valid_challenge("plain"));
    }

    #[test]
    fn redirects_match_exactly_except_a_loopback_port() {
        assert!(redirect_matches(
            "https://claude.ai/api/mcp/auth_callback",
            "https://claude.ai/api/mcp/auth_callback"
        ));
        assert!(!redirect_matches(
            "https://claude.ai/api/mcp/auth_callback",
            "https://claude.ai/api/mcp/auth_callbacK"
        ));
        assert!(!redirect_matches(
            "https://claude.ai/cb",
            "https://claude.ai:8443/cb"
        ));
        assert!(redirect_matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:53123/callback"
        ));
        assert!(redirect_matches(
            "http://localhost:1/callback",
            "http://localhost:2/callback"
        ));
        assert!(redirect_matches("http://[::1]:1/cb", "http://[::1]:9/cb"));
        assert!(!redirect_matches(
            "http://127.0.0.1:1/callback",
            "http://127.0.0.1:1/callbacks"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1:1/cb",
            "http://127.0.0.2:1/cb"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1:1/cb",
            "http://127.0.0.1.evil.com:1/cb"
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1:1/cb",
            "http://127.0.0.1:/cb"
        ));
    }

    #[test]
    fn only_safe_redirect_uris_register() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://127.0.0.1:3000/callback",
            "http://localhost/cb",
            "http://[::1]:8/cb",
            "com.example.app:/oauth",
            "cursor://anysphere.cursor-retrieval/oauth/callback",
        ] {
            assert_eq!(redirect_uri_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "/relative",
            "https://x/cb#frag",
            "http://example.com/cb",
            "javascript:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
            "https:///nohost",
            "https://x/a b",
            "1http://x",
        ] {
            assert!(redirect_uri_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn redirects_carry_their_parameters_encoded() {
        assert_eq!(
            with_query("https://c/cb", &[("code", "a b"), ("state", "x&y")]),
            "https://c/cb?code=a%20b&state=x%26y"
        );
        assert_eq!(
            with_query("https://c/cb?k=1", &[("code", "z")]),
            "https://c/cb?k=1&code=z"
        );
        assert_eq!(
            redirect_origin("http://127.0.0.1:5/cb?x"),
            "http://127.0.0.1:5"
        );
        assert_eq!(redirect_origin("com.example.app:/cb"), "com.example.app:");
    }
}
