//! Discovery over HTTP: the signed Agent Card at `/.well-known/agent-card.json` and the key set
//! its signatures point at, `/.well-known/jwks.json`. Both are public, cacheable, and answer
//! conditional GETs with 304. The bodies are rendered once, at signing time, and published as
//! served for admins (`crate::keys::Published`).
//!
//! Validators: the `ETag` is derived from the content (the same on every replica) and is the one
//! to use; `If-None-Match` decides whenever a request carries it (RFC 9110 §13.2.2).
//! `Last-Modified` is the second at which this process began serving the content it serves now
//! (a re-signing with the same content keeps it), so it only moves forward with the `ETag`;
//! `If-Modified-Since` at or after it gets 304 when the request carries no `If-None-Match`.
//! Replicas that started at different times give different `Last-Modified` values for the same
//! content: a client that then refetches an unchanged card is the worst that follows.

use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::card::{CARD_PATH, JWKS_PATH, SignedCard};

/// How long clients may reuse the card and the key set. Short enough that a key rotation (whose
/// old key keeps co-signing for days) reaches every client well within the overlap.
pub const CACHE_CONTROL: &str = "public, max-age=300";

/// The card being served, replaced (re-signed) when the signing keys change.
#[derive(Clone)]
pub struct ServedCard {
    served: Arc<RwLock<Served>>,
    /// Where every card served is also published for admins, if anywhere.
    mirror: Option<Arc<Mirror>>,
}

/// The admins' copy of what is served ([`crate::keys::Published`]), with its public addresses.
struct Mirror {
    to: crate::keys::Published,
    card_url: String,
    jwks_url: String,
}

impl Mirror {
    fn write(&self, card: &SignedCard) {
        self.to.set(crate::keys::PublishedDocs {
            card_url: self.card_url.clone(),
            card: card.json().to_vec(),
            jwks_url: self.jwks_url.clone(),
            jwks: card.jwks_json().to_vec(),
        });
    }
}

struct Served {
    card: Arc<SignedCard>,
    /// Strong validator of the key set (its bytes are deterministic).
    jwks_etag: Arc<str>,
    /// When this process began serving this content, in whole seconds (HTTP dates have no
    /// finer resolution).
    modified: Modified,
}

/// A `Last-Modified` time: seconds since the epoch, and as an HTTP date.
#[derive(Clone)]
struct Modified {
    secs: i64,
    http_date: Arc<str>,
}

impl Modified {
    fn now() -> Modified {
        let secs = chrono::Utc::now().timestamp();
        let http_date = chrono::DateTime::from_timestamp(secs, 0)
            .unwrap_or_default()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        Modified {
            secs,
            http_date: http_date.into(),
        }
    }
}

impl Served {
    /// `card`, last modified `modified` (none: now).
    fn of(card: SignedCard, modified: Option<Modified>) -> Served {
        let digest = ring::digest::digest(&ring::digest::SHA256, card.jwks_json());
        let jwks_etag = format!("\"{}\"", URL_SAFE_NO_PAD.encode(digest.as_ref()));
        Served {
            card: Arc::new(card),
            jwks_etag: jwks_etag.into(),
            modified: modified.unwrap_or_else(Modified::now),
        }
    }
}

impl ServedCard {
    pub fn new(card: SignedCard) -> ServedCard {
        ServedCard {
            served: Arc::new(RwLock::new(Served::of(card, None))),
            mirror: None,
        }
    }

    /// Also publishes the card served now and every later one to `to`, as served under
    /// `public_url` (what the admins' keys page shows).
    pub fn published_to(mut self, to: crate::keys::Published, public_url: &str) -> ServedCard {
        let base = public_url.trim_end_matches('/');
        let mirror = Mirror {
            to,
            card_url: format!("{base}{CARD_PATH}"),
            jwks_url: format!("{base}{JWKS_PATH}"),
        };
        mirror.write(&self.current().0);
        self.mirror = Some(Arc::new(mirror));
        self
    }

    /// Serves `card` from now on.
    pub fn replace(&self, card: SignedCard) {
        let mut served = self.served.write().unwrap_or_else(|e| e.into_inner());
        // Under the lock, so the admins' copy is always the card served.
        if let Some(mirror) = &self.mirror {
            mirror.write(&card);
        }
        // The same content signed again is not a modification.
        let same = served.card.etag() == card.etag();
        *served = Served::of(card, same.then(|| served.modified.clone()));
    }

    fn current(&self) -> (Arc<SignedCard>, Arc<str>, Modified) {
        let served = self.served.read().unwrap_or_else(|e| e.into_inner());
        (
            served.card.clone(),
            served.jwks_etag.clone(),
            served.modified.clone(),
        )
    }
}

/// The discovery routes, to merge into the app's router.
pub fn router(card: ServedCard) -> Router {
    Router::new()
        .route(CARD_PATH, get(agent_card))
        .route(JWKS_PATH, get(jwks))
        .with_state(card)
}

async fn agent_card(State(state): State<ServedCard>, request: HeaderMap) -> Response {
    let (card, _, modified) = state.current();
    cached_json(&request, card.etag(), &modified, card.json())
}

async fn jwks(State(state): State<ServedCard>, request: HeaderMap) -> Response {
    // The key set changes only with the card's signatures: the card's time is never earlier.
    let (card, etag, modified) = state.current();
    cached_json(&request, &etag, &modified, card.jwks_json())
}

/// A JSON body with caching headers, or 304 when the client's copy is current.
fn cached_json(request: &HeaderMap, etag: &str, modified: &Modified, body: &[u8]) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    if let Ok(value) = HeaderValue::from_str(&modified.http_date) {
        headers.insert(header::LAST_MODIFIED, value);
    }
    // Public discovery documents: any origin may read them.
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    let current = if request.contains_key(header::IF_NONE_MATCH) {
        none_match(request, etag)
    } else {
        not_modified_since(request, modified.secs)
    };
    if current {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    (StatusCode::OK, headers, body.to_vec()).into_response()
}

/// Whether `If-Modified-Since` is a valid HTTP date at or after `modified` (seconds). An invalid
/// date is ignored, as RFC 9110 §13.1.3 says.
fn not_modified_since(request: &HeaderMap, modified: i64) -> bool {
    request
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|value| value.to_str().ok())
        .and_then(http_date_secs)
        .is_some_and(|since| since >= modified)
}

/// Seconds since the epoch of an HTTP date: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), or
/// the obsolete RFC 850 and asctime forms recipients must accept (RFC 9110 §5.6.7).
fn http_date_secs(text: &str) -> Option<i64> {
    let text = text.trim();
    let parse = |format: &str| chrono::NaiveDateTime::parse_from_str(text, format).ok();
    parse("%a, %d %b %Y %H:%M:%S GMT")
        .or_else(|| parse("%A, %d-%b-%y %H:%M:%S GMT"))
        .or_else(|| parse("%a %b %e %H:%M:%S %Y"))
        .map(|t| t.and_utc().timestamp())
}

/// Whether `If-None-Match` names `etag` (weak comparison, RFC 9110 §13.1.2) or is `*`.
fn none_match(request: &HeaderMap, etag: &str) -> bool {
    let ours = opaque(etag);
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .any(|candidate| candidate == "*" || opaque(candidate) == ours)
}

/// An entity tag without its weakness indicator.
fn opaque(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::card::{CardDefinition, Endpoints};
    use crate::keys::jose::verify_card;
    use crate::keys::ring::{Jwks, KeyRing, MasterKey, SigningKey};

    /// A ring of one new key.
    fn new_ring() -> KeyRing {
        let master = MasterKey::from_hex(&"07".repeat(32)).unwrap();
        let (_, record) = SigningKey::generate(&master).unwrap();
        KeyRing::open(&[record], &master).unwrap()
    }

    fn signed_by(ring: &KeyRing) -> SignedCard {
        let definition =
            CardDefinition::from_toml(include_str!("../../agent-card/card.toml")).unwrap();
        let endpoints = Endpoints::standard("https://liaison.example", None);
        SignedCard::sign(&definition, &endpoints, ring).unwrap()
    }

    fn signed_card() -> SignedCard {
        signed_by(&new_ring())
    }

    /// Serves the router on a loopback port; returns its base URL.
    async fn serve(card: SignedCard) -> String {
        crate::net::tls::install_crypto_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(axum::serve(listener, router(ServedCard::new(card))).into_future());
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn card_is_served_with_caching_headers_and_verifies() {
        let base = serve(signed_card()).await;
        let client = reqwest::Client::new();
        let card = client
            .get(format!("{base}{CARD_PATH}"))
            .send()
            .await
            .unwrap();
        assert_eq!(card.status(), 200);
        assert_eq!(card.headers()["content-type"], "application/json");
        assert_eq!(card.headers()["cache-control"], CACHE_CONTROL);
        let etag = card.headers()["etag"].to_str().unwrap().to_owned();
        assert!(etag.starts_with("W/\""));
        let card = card.bytes().await.unwrap();

        let jwks = client
            .get(format!("{base}{JWKS_PATH}"))
            .send()
            .await
            .unwrap();
        assert_eq!(jwks.status(), 200);
        assert_eq!(jwks.headers()["cache-control"], CACHE_CONTROL);
        let jwks: Jwks = jwks.json().await.unwrap();
        assert!(verify_card(&card, &jwks).is_ok());
    }

    #[tokio::test]
    async fn last_modified_answers_if_modified_since_unless_if_none_match_is_sent() {
        let signed = signed_card();
        let etag = signed.etag().to_owned();
        let base = serve(signed).await;
        let client = reqwest::Client::new();
        let url = format!("{base}{CARD_PATH}");
        let get = |headers: Vec<(&'static str, String)>| {
            let mut request = client.get(&url);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            async move { request.send().await.unwrap() }
        };
        let first = get(vec![]).await;
        let last_modified = first.headers()["last-modified"]
            .to_str()
            .unwrap()
            .to_owned();
        let secs = http_date_secs(&last_modified).expect("an IMF-fixdate");
        assert!((chrono::Utc::now().timestamp() - secs).abs() < 60);
        let date = |s: i64, f: &str| {
            chrono::DateTime::from_timestamp(s, 0)
                .unwrap()
                .format(f)
                .to_string()
        };
        let fixdate = "%a, %d %b %Y %H:%M:%S GMT";
        for (since, status) in [
            (last_modified.clone(), 304),
            (date(secs + 3600, fixdate), 304),
            (date(secs, "%A, %d-%b-%y %H:%M:%S GMT"), 304),
            (date(secs, "%a %b %e %H:%M:%S %Y"), 304),
            (date(secs - 1, fixdate), 200),
            ("yesterday".into(), 200),
        ] {
            let response = get(vec![("if-modified-since", since.clone())]).await;
            assert_eq!(response.status(), status, "{since}");
            assert_eq!(response.headers()["last-modified"], last_modified.as_str());
            assert_eq!(response.headers()["etag"], etag.as_str());
        }
        // If-None-Match decides when both are sent (RFC 9110 §13.2.2), either way.
        let stale_tag = vec![
            ("if-none-match", "W/\"other\"".to_owned()),
            ("if-modified-since", last_modified.clone()),
        ];
        assert_eq!(get(stale_tag).await.status(), 200);
        let current_tag = vec![
            ("if-none-match", etag.clone()),
            ("if-modified-since", date(secs - 3600, fixdate)),
        ];
        assert_eq!(get(current_tag).await.status(), 304);
        let jwks = client
            .get(format!("{base}{JWKS_PATH}"))
            .header("if-modified-since", last_modified.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(jwks.status(), 304);
    }

    #[test]
    fn re_signing_the_same_content_keeps_last_modified_and_new_content_moves_it() {
        let ring = new_ring();
        let served = ServedCard::new(signed_by(&ring));
        let (_, _, before) = served.current();
        served.served.write().unwrap().modified.secs -= 100;
        // ECDSA signatures differ at each signing; the content (and so the ETag) does not.
        served.replace(signed_by(&ring));
        let (_, _, same) = served.current();
        assert_eq!(same.secs, before.secs - 100, "the same content");
        served.replace(signed_card());
        let (_, _, moved) = served.current();
        assert!(moved.secs >= before.secs, "new keys: new content, now");
    }

    #[tokio::test]
    async fn conditional_get_with_a_current_etag_is_not_modified() {
        let signed = signed_card();
        let etag = signed.etag().to_owned();
        let base = serve(signed).await;
        let client = reqwest::Client::new();
        let url = format!("{base}{CARD_PATH}");
        for if_none_match in [
            etag.clone(),
            opaque(&etag).to_owned(),
            format!("\"x\", {etag}"),
            "*".into(),
        ] {
            let response = client
                .get(&url)
                .header("if-none-match", &if_none_match)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 304, "{if_none_match}");
            assert_eq!(response.headers()["etag"], etag.as_str());
            assert_eq!(response.headers()["cache-control"], CACHE_CONTROL);
            assert!(response.bytes().await.unwrap().is_empty());
        }
        let stale = client
            .get(&url)
            .header("if-none-match", "W/\"stale\"")
            .send()
            .await
            .unwrap();
        assert_eq!(stale.status(), 200);
    }

    #[tokio::test]
    async fn jwks_answers_conditional_gets_too() {
        let base = serve(signed_card()).await;
        let client = reqwest::Client::new();
        let url = format!("{base}{JWKS_PATH}");
        let first = client.get(&url).send().await.unwrap();
        let etag = first.headers()["etag"].to_str().unwrap().to_owned();
        let again = client
            .get(&url)
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304);
    }

    #[tokio::test]
    async fn what_is_served_is_published_for_admins_byte_for_byte() {
        let published = crate::keys::Published::default();
        let served =
            ServedCard::new(signed_card()).published_to(published.clone(), "https://l.example/");
        let docs = published.current().unwrap();
        assert_eq!(
            docs.card_url,
            "https://l.example/.well-known/agent-card.json"
        );
        assert_eq!(docs.jwks_url, "https://l.example/.well-known/jwks.json");
        let (card, _, _) = served.current();
        assert_eq!(docs.card, card.json());
        assert_eq!(docs.jwks, card.jwks_json());
        // A re-signed card replaces both.
        served.replace(signed_card());
        let (card, _, _) = served.current();
        let again = published.current().unwrap();
        assert_eq!(again.card, card.json());
        assert_ne!(again.jwks, docs.jwks, "another key signed it");
        let headers = crate::keys::jose::signature_headers(&again.card).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0]["alg"], "ES256");
        assert_eq!(
            headers[0]["jku"],
            "https://liaison.example/.well-known/jwks.json"
        );
    }

    #[test]
    fn if_none_match_uses_weak_comparison() {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"abc\""));
        assert!(none_match(&headers, "W/\"abc\""));
        assert!(!none_match(&headers, "W/\"abd\""));
        assert!(!none_match(&HeaderMap::new(), "W/\"abc\""));
    }
}
