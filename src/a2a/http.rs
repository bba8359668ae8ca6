//! Discovery over HTTP: the signed Agent Card at `/.well-known/agent-card.json` and the key set
//! its signatures point at, `/.well-known/jwks.json`. Both are public, cacheable, and answer
//! conditional GETs (`If-None-Match`) with 304. The bodies are rendered once, at signing time, and
//! published as served for admins (`crate::keys::Published`).

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
}

impl Served {
    fn of(card: SignedCard) -> Served {
        let digest = ring::digest::digest(&ring::digest::SHA256, card.jwks_json());
        let jwks_etag = format!("\"{}\"", URL_SAFE_NO_PAD.encode(digest.as_ref()));
        Served {
            card: Arc::new(card),
            jwks_etag: jwks_etag.into(),
        }
    }
}

impl ServedCard {
    pub fn new(card: SignedCard) -> ServedCard {
        ServedCard {
            served: Arc::new(RwLock::new(Served::of(card))),
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
        *served = Served::of(card);
    }

    fn current(&self) -> (Arc<SignedCard>, Arc<str>) {
        let served = self.served.read().unwrap_or_else(|e| e.into_inner());
        (served.card.clone(), served.jwks_etag.clone())
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
    let (card, _) = state.current();
    cached_json(&request, card.etag(), card.json())
}

async fn jwks(State(state): State<ServedCard>, request: HeaderMap) -> Response {
    let (card, etag) = state.current();
    cached_json(&request, &etag, card.jwks_json())
}

/// A JSON body with caching headers, or 304 when the client's copy is current.
fn cached_json(request: &HeaderMap, etag: &str, body: &[u8]) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    // Public discovery documents: any origin may read them.
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    if none_match(request, etag) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    (StatusCode::OK, headers, body.to_vec()).into_response()
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

    fn signed_card() -> SignedCard {
        let master = MasterKey::from_hex(&"07".repeat(32)).unwrap();
        let (_, record) = SigningKey::generate(&master).unwrap();
        let ring = KeyRing::open(&[record], &master).unwrap();
        let definition =
            CardDefinition::from_toml(include_str!("../../agent-card/card.toml")).unwrap();
        let endpoints = Endpoints::standard("https://liaison.example", None);
        SignedCard::sign(&definition, &endpoints, &ring).unwrap()
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
        let (card, _) = served.current();
        assert_eq!(docs.card, card.json());
        assert_eq!(docs.jwks, card.jwks_json());
        // A re-signed card replaces both.
        served.replace(signed_card());
        let (card, _) = served.current();
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
