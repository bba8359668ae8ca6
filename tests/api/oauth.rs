//! OAuth 2.1 for MCP clients (SPEC §7): a client given only `/mcp` discovers liaison as its
//! authorization server, registers, sends the member to the console's consent page, and gets
//! audience-bound access tokens and rotating refresh tokens for the grant — a connection like a
//! pasted token. Every refusal the issue lists is the RFCs' error and grants nothing. Both
//! backends (the database is the one `LIAISON_TEST_DATABASE_URL` names).

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderMap, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

use liaison::domain::oauth::s256;
use liaison::domain::{ConnectionRights, RightLevel};
use liaison::keys::ring::MasterKey;
use liaison::service::{ErrorCode, OAuthSettings, Settings};

use crate::helpers::TestEnv;

const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const REDIRECT: &str = "http://127.0.0.1:4711/callback";

struct Oauth {
    env: TestEnv,
    url: String,
    http: reqwest::Client,
}

async fn served(enabled: bool) -> Oauth {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let settings = Settings {
        oauth: OAuthSettings {
            enabled,
            issuer: liaison::service::issuer_for(&url),
            resource: format!("{url}/mcp"),
            registrations_per_hour: 5,
            ..OAuthSettings::default()
        },
        ..Settings::default()
    };
    let env = TestEnv::with_master(
        settings,
        MasterKey::from_hex(crate::remotes::MASTER_HEX).unwrap(),
    )
    .await;
    env.member("alice", "claude@a:1").await;
    env.member("bob", "codex@b:1").await;
    let service = env.service.clone();
    let router = liaison::console::router(service.clone(), &url)
        .merge(liaison::oauth::router(service.clone()))
        .merge(liaison::admin::router(service.clone()))
        .merge(liaison::api::router(service.clone()))
        .merge(liaison::mcp::router(
            service,
            &liaison::mcp::McpSettings::default(),
            &url,
            tokio_util::sync::CancellationToken::new(),
        ));
    tokio::spawn(async move { axum::serve(listener, router).await });
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Oauth { env, url, http }
}

fn unescape(s: &str) -> String {
    s.replace("&#x2f;", "/")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The value of the first input named `name` in a page.
fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {name} in {html}"))
        + marker.len();
    unescape(html[start..].split('"').next().unwrap())
}

fn cookie(headers: &HeaderMap, name: &str) -> String {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie"))
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                liaison::domain::oauth::form_encode(k),
                liaison::domain::oauth::form_encode(v)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The query parameter `name` of a URL.
fn param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    reqwest::Url::parse(&format!("http://x/?{query}"))
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

impl Oauth {
    async fn get(&self, path: &str, cookie: Option<&str>) -> (StatusCode, HeaderMap, String) {
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.url)
        };
        let mut req = self.http.get(url);
        if let Some(c) = cookie {
            req = req.header(COOKIE, c);
        }
        let r = req.send().await.unwrap();
        (r.status(), r.headers().clone(), r.text().await.unwrap())
    }

    async fn post_form(
        &self,
        path: &str,
        cookie: Option<&str>,
        fields: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, String) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form(fields));
        if let Some(c) = cookie {
            req = req.header(COOKIE, c);
        }
        let r = req.send().await.unwrap();
        (r.status(), r.headers().clone(), r.text().await.unwrap())
    }

    async fn token(&self, fields: &[(&str, &str)]) -> (StatusCode, Value) {
        let (status, _, body) = self.post_form("/oauth/token", None, fields).await;
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    async fn register(&self, body: Value) -> (StatusCode, HeaderMap, Value) {
        let r = self
            .http
            .post(format!("{}/oauth/register", self.url))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let headers = r.headers().clone();
        (
            r.status(),
            headers,
            serde_json::from_str(&r.text().await.unwrap()).unwrap_or(Value::Null),
        )
    }

    async fn client(&self, name: &str) -> String {
        let (status, _, body) = self
            .register(json!({"client_name": name, "redirect_uris": [REDIRECT]}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["client_id"].as_str().unwrap().to_owned()
    }

    /// A console session of `person`: its cookie.
    async fn sign_in(&self, person: &str) -> String {
        let link = self
            .env
            .service
            .issue_login_link(&self.env.admin, &crate::helpers::pid(person), None)
            .await
            .unwrap();
        let (status, headers, html) = self
            .get(&format!("/console/login?link={}", link.secret), None)
            .await;
        assert_eq!(status, 200, "{html}");
        let form_cookie = cookie(&headers, "liaison_form");
        let (status, headers, _) = self
            .post_form(
                "/console/login",
                Some(&form_cookie),
                &[
                    ("link", &field(&html, "link")),
                    ("csrf", &field(&html, "csrf")),
                ],
            )
            .await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        cookie(&headers, "liaison_session")
    }

    fn authorize_query(&self, client: &str, extra: &[(&str, &str)]) -> String {
        let challenge = s256(VERIFIER);
        let mut fields = vec![
            ("response_type", "code"),
            ("client_id", client),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", "st-1"),
            ("resource", ""),
        ];
        let resource = format!("{}/mcp", self.url);
        fields[6].1 = &resource;
        for (k, v) in extra {
            fields.retain(|(n, _)| n != k);
            if !v.is_empty() {
                fields.push((k, v));
            }
        }
        format!("/oauth/authorize?{}", form(&fields))
    }

    /// Alice consents on the page `/oauth/authorize?…` led to, naming the connection; the code.
    async fn consent(&self, session: &str, client: &str, name: &str) -> String {
        let (status, headers, _) = self.get(&self.authorize_query(client, &[]), None).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        let page = headers[LOCATION].to_str().unwrap().to_owned();
        assert!(page.starts_with("/console/oauth/consent?"), "{page}");
        let (status, _, html) = self.get(&page, Some(session)).await;
        assert_eq!(status, 200, "{html}");
        let (status, headers, body) = self
            .post_decision(Some(session), &decision_fields(&html, "allow", name))
            .await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
        let back = headers[LOCATION].to_str().unwrap();
        assert!(back.starts_with(REDIRECT), "{back}");
        assert_eq!(param(back, "state").as_deref(), Some("st-1"));
        // RFC 9207: the response names its issuer, exactly as the metadata does.
        assert_eq!(param(back, "iss"), Some(self.url.clone()));
        param(back, "code").expect("a code")
    }

    async fn exchange(&self, client: &str, code: &str) -> (StatusCode, Value) {
        self.token(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("client_id", client),
            ("code_verifier", VERIFIER),
        ])
        .await
    }

    async fn refresh(&self, client: &str, refresh: &str) -> (StatusCode, Value) {
        self.token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", client),
        ])
        .await
    }

    async fn audit_events(&self) -> Vec<String> {
        self.env
            .service
            .audit(&self.env.admin, &liaison::service::AuditQuery::default())
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect()
    }

    /// How many connections alice holds (the witness that a refusal granted nothing).
    async fn alice_connections(&self) -> usize {
        let human = self
            .env
            .caller("alice", liaison::domain::Scope::Human, "x@y:1")
            .await;
        self.env.service.own_tokens(&human).await.unwrap().len()
    }
}

/// The consent form's fields as the page has them, with `decision` and the connection name.
fn decision_fields<'a>(html: &str, decision: &'a str, name: &'a str) -> Vec<(&'a str, String)> {
    let mut out: Vec<(&str, String)> = [
        "csrf",
        "binding",
        "response_type",
        "client_id",
        "redirect_uri",
        "code_challenge",
        "code_challenge_method",
        "state",
        "resource",
    ]
    .into_iter()
    .map(|k| (k, field(html, k)))
    .collect();
    out.push(("decision", decision.into()));
    out.push(("connection", name.into()));
    out.push(("rights_code", "confirm".into()));
    out
}

trait Fields {
    fn refs(&self) -> Vec<(&str, &str)>;
}
impl Fields for Vec<(&str, String)> {
    fn refs(&self) -> Vec<(&str, &str)> {
        self.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }
}

impl Oauth {
    async fn post_decision(
        &self,
        session: Option<&str>,
        fields: &[(&str, String)],
    ) -> (StatusCode, HeaderMap, String) {
        let v: Vec<(&str, String)> = fields.to_vec();
        self.post_form("/console/oauth/consent", session, &v.refs())
            .await
    }
}

#[tokio::test]
async fn a_client_given_only_the_mcp_url_discovers_registers_consents_and_connects() {
    let o = served(true).await;
    // /mcp answers 401 with the metadata's address; the metadata names liaison.
    let r = o
        .http
        .post(format!("{}/mcp", o.url))
        .header(CONTENT_TYPE, "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{}/.well-known/oauth-protected-resource\"",
            o.url
        )),
        "{challenge}"
    );
    let (_, _, prm) = o.get("/.well-known/oauth-protected-resource", None).await;
    let prm: Value = serde_json::from_str(&prm).unwrap();
    // The issuer identifier is the URL itself (RFC 8414), in both documents and in `iss`.
    assert_eq!(prm["authorization_servers"], json!([o.url.clone()]));
    assert_eq!(prm["resource"], json!(format!("{}/mcp", o.url)));
    let (status, _, asm) = o.get("/.well-known/oauth-authorization-server", None).await;
    assert_eq!(status, 200);
    let asm: Value = serde_json::from_str(&asm).unwrap();
    assert_eq!(asm["issuer"], json!(o.url.clone()));
    // `iss` is sent but not advertised (src/oauth/README.md).
    assert!(
        asm.get("authorization_response_iss_parameter_supported")
            .is_none()
    );
    assert_eq!(asm["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(asm["client_id_metadata_document_supported"], json!(true));
    assert_eq!(
        asm["token_endpoint"],
        json!(format!("{}/oauth/token", o.url))
    );

    let client = o.client("Claude <b>web</b>").await;
    let session = o.sign_in("alice").await;
    // The page shows the client as self-declared, escaped, and cannot be framed.
    let (_, headers, _) = o.get(&o.authorize_query(&client, &[]), None).await;
    let page = headers[LOCATION].to_str().unwrap().to_owned();
    let (status, headers, html) = o.get(&page, Some(&session)).await;
    assert_eq!(status, 200);
    assert!(html.contains("self-declared") && html.contains("Claude &lt;b&gt;web&lt;&#x2f;b&gt;"));
    assert!(!html.contains("<b>web"));
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(headers["x-frame-options"], "DENY");

    let code = o.consent(&session, &client, "claude-web").await;
    let (status, tokens) = o.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 900);
    let access = tokens["access_token"].as_str().unwrap();
    let caller = o.env.service.authenticate(access).await.unwrap();
    assert_eq!(caller.id().as_str(), "alice");
    let connection = caller.connection.clone().expect("a connection");
    assert_eq!(connection.name.as_str(), "claude-web");
    let mut rights = ConnectionRights::default();
    rights.set(liaison::domain::Impact::Code, RightLevel::Confirm);
    assert_eq!(connection.rights, rights);
    // An access token works where an agent token works: /mcp answers it.
    let r = o
        .http
        .post(format!("{}/mcp", o.url))
        .bearer_auth(access)
        .header(CONTENT_TYPE, "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // …and so do the agent endpoints of /api/v1 (what the hooks call).
    let r = o
        .http
        .get(format!("{}/api/v1/inbox?consumer=hooks", o.url))
        .bearer_auth(access)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // The grant is one of her connections, with its client named; audited.
    assert!(o.audit_events().await.contains(&"oauth.granted".to_owned()));
    let human = o
        .env
        .caller("alice", liaison::domain::Scope::Human, "x@y:1")
        .await;
    let mine = o.env.service.own_tokens(&human).await.unwrap();
    let grant = mine
        .iter()
        .find(|t| t.token.id == caller.token_id)
        .expect("listed on Connect");
    assert_eq!(grant.token.description, "Claude <b>web</b> (OAuth client)");
    assert!(grant.live);

    // Refresh rotates; the access token expires after its 15 minutes; the new one works.
    let (status, next) = o
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{next}");
    assert_ne!(next["refresh_token"], tokens["refresh_token"]);
    o.env.clock.advance_secs(901);
    let e = o.env.service.authenticate(access).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenExpired);
    let (status, third) = o
        .refresh(&client, next["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{third}");
    o.env
        .service
        .authenticate(third["access_token"].as_str().unwrap())
        .await
        .unwrap();

    // Revoked on Connect: the access token and the refresh token stop at once.
    o.env
        .service
        .revoke_own_token(&human, &caller.token_id)
        .await
        .unwrap();
    let e = o
        .env
        .service
        .authenticate(third["access_token"].as_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked);
    let (status, body) = o
        .refresh(&client, third["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
}

#[tokio::test]
async fn bad_authorization_requests_are_refused_and_grant_nothing() {
    let o = served(true).await;
    let client = o.client("Claude").await;
    let session = o.sign_in("alice").await;
    // Refused back to the client, with the RFCs' error and the state.
    for (extra, error) in [
        (vec![("code_challenge", "")], "invalid_request"),
        (vec![("code_challenge_method", "")], "invalid_request"),
        (
            vec![
                ("code_challenge_method", "plain"),
                ("code_challenge", VERIFIER),
            ],
            "invalid_request",
        ),
        (vec![("code_challenge", "short")], "invalid_request"),
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (
            vec![("resource", "https://elsewhere.example/mcp")],
            "invalid_target",
        ),
        (vec![("scope", "admin")], "invalid_scope"),
    ] {
        let (status, headers, body) = o.get(&o.authorize_query(&client, &extra), None).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{extra:?}: {body}");
        let to = headers[LOCATION].to_str().unwrap();
        assert!(to.starts_with(REDIRECT), "{to}");
        assert_eq!(param(to, "error").as_deref(), Some(error), "{extra:?}");
        assert_eq!(param(to, "state").as_deref(), Some("st-1"));
        assert_eq!(param(to, "iss"), Some(o.url.clone()));
        assert_eq!(param(to, "code"), None);
    }
    // Shown, never redirected: an unknown client, a redirect URI one character off, a
    // metadata document URL that is not https or points at a private address.
    for extra in [
        vec![("client_id", "ocl_unknown")],
        vec![("redirect_uri", "http://127.0.0.1:4711/callbacK")],
        vec![("redirect_uri", "http://127.0.0.1:4711/callback/")],
        vec![("client_id", "http://app.example.com/client.json")],
        vec![("client_id", "https://127.0.0.1/client.json")],
        vec![("client_id", "https://10.1.2.3/client.json")],
    ] {
        let (status, headers, body) = o.get(&o.authorize_query(&client, &extra), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{extra:?}: {body}");
        assert!(headers.get(LOCATION).is_none());
        assert_eq!(
            headers["x-frame-options"], "DENY",
            "the refusal page cannot be framed"
        );
        assert!(
            body.contains("invalid_client") || body.contains("invalid_request"),
            "{body}"
        );
    }
    // A loopback redirect URI matches on any port (RFC 8252).
    let (status, headers, _) = o
        .get(
            &o.authorize_query(
                &client,
                &[("redirect_uri", "http://127.0.0.1:5999/callback")],
            ),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        headers[LOCATION]
            .to_str()
            .unwrap()
            .starts_with("/console/oauth/consent?")
    );
    // The consent page refuses the same requests itself.
    let (status, _, _) = o
        .get(
            &format!(
                "/console/oauth/consent?{}",
                o.authorize_query(&client, &[("redirect_uri", "http://127.0.0.1:4711/x")])
                    .split_once('?')
                    .unwrap()
                    .1
            ),
            Some(&session),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(o.alice_connections().await, 1, "only the token she had");
}

#[tokio::test]
async fn consent_is_bound_to_the_session_and_the_request_it_showed() {
    let o = served(true).await;
    let client = o.client("Claude").await;
    let session = o.sign_in("alice").await;
    let bob = o.sign_in("bob").await;
    let (_, headers, _) = o.get(&o.authorize_query(&client, &[]), None).await;
    let page = headers[LOCATION].to_str().unwrap().to_owned();
    // Not signed in: the sign-in page, nothing else.
    let (status, _, html) = o.get(&page, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(html.contains("login link"), "{html}");
    // Sent here by another site, the browser withheld her SameSite=Strict cookie: the page
    // reloads itself from this site (which sends it), and changes nothing.
    let r = o
        .http
        .get(format!("{}{page}", o.url))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let bounce = r.text().await.unwrap();
    assert!(bounce.contains("http-equiv=\"refresh\""), "{bounce}");
    assert!(!bounce.contains("Allow"));
    let (_, _, html) = o.get(&page, Some(&session)).await;
    let good = decision_fields(&html, "allow", "claude");
    let with = |k: &str, v: &str| {
        let mut f = good.clone();
        for (n, value) in f.iter_mut() {
            if *n == k {
                *value = v.to_owned();
            }
        }
        f
    };
    // Another site's form (no CSRF token), a changed redirect or challenge, another session.
    for (session, fields) in [
        (Some(session.as_str()), with("csrf", "")),
        (
            Some(session.as_str()),
            with("redirect_uri", "http://127.0.0.1:1/callback"),
        ),
        (
            Some(session.as_str()),
            with("code_challenge", &s256("x".repeat(50).as_str())),
        ),
        (Some(session.as_str()), with("binding", "forged")),
        (Some(bob.as_str()), good.clone()),
        (None, good.clone()),
    ] {
        let (status, headers, body) = o.post_decision(session, &fields).await;
        assert!(status.is_client_error(), "{status}: {body}");
        assert!(headers.get(LOCATION).is_none());
    }
    assert_eq!(o.alice_connections().await, 1, "only the token she had");
    // A name taken: the page again, with why; then denying sends the client access_denied.
    let (status, _, body) = o
        .post_decision(Some(&session), &with("connection", "Not A Slug"))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, headers, _) = o
        .post_decision(Some(&session), &with("decision", "deny"))
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let to = headers[LOCATION].to_str().unwrap();
    assert_eq!(param(to, "error").as_deref(), Some("access_denied"));
    assert_eq!(param(to, "iss"), Some(o.url.clone()));
    assert_eq!(param(to, "code"), None);
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("form-action 'self' http://127.0.0.1:4711"),
        "{csp}"
    );
    assert_eq!(o.alice_connections().await, 1, "only the token she had");
}

#[tokio::test]
async fn codes_are_single_use_and_bound_to_client_redirect_verifier_and_resource() {
    let o = served(true).await;
    let client = o.client("Claude").await;
    let other = o.client("Other").await;
    let session = o.sign_in("alice").await;
    let resource = format!("{}/mcp", o.url);
    let wrong_verifier = "x".repeat(43);
    // Each refusal spends the code (no second try) and grants no token.
    type Case<'a> = (Vec<(&'a str, &'a str)>, StatusCode, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            vec![("code_verifier", "")],
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            vec![("code_verifier", &wrong_verifier)],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
        ),
        (
            vec![("redirect_uri", "http://127.0.0.1:4711/callbacK")],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
        ),
        (
            vec![("client_id", &other)],
            StatusCode::BAD_REQUEST,
            "invalid_grant",
        ),
        (
            vec![("client_id", "ocl_nobody")],
            StatusCode::UNAUTHORIZED,
            "invalid_client",
        ),
        (
            vec![("resource", "https://elsewhere.example/mcp")],
            StatusCode::BAD_REQUEST,
            "invalid_target",
        ),
        (
            vec![("grant_type", "password")],
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
        ),
    ];
    for (i, (changes, status, error)) in cases.into_iter().enumerate() {
        let code = o.consent(&session, &client, &format!("c{i}")).await;
        let mut fields = vec![
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("client_id", client.as_str()),
            ("code_verifier", VERIFIER),
            ("resource", resource.as_str()),
        ];
        for (k, v) in &changes {
            fields.retain(|(n, _)| n != k);
            if !v.is_empty() {
                fields.push((k, v));
            }
        }
        let (got, body) = o.token(&fields).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (status, Some(error)),
            "{changes:?}: {body}"
        );
        assert!(body.get("access_token").is_none());
    }
    // A code used twice: the second use is refused and revokes what the first got.
    let code = o.consent(&session, &client, "twice").await;
    let (status, tokens) = o.exchange(&client, &code).await;
    assert_eq!(status, 200);
    let (status, body) = o.exchange(&client, &code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let e = o
        .env
        .service
        .authenticate(tokens["access_token"].as_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked);
    assert!(
        o.audit_events()
            .await
            .contains(&"oauth.code_reused".to_owned())
    );
    // An expired code.
    let code = o.consent(&session, &client, "late").await;
    o.env.clock.advance_secs(121);
    let (status, body) = o.exchange(&client, &code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    // A forged access token, one for this grant with a changed expiry: unknown.
    let forged = {
        let t = tokens["access_token"].as_str().unwrap();
        let (head, mac) = t.rsplit_once('.').unwrap();
        let (grant, _) = head.rsplit_once('.').unwrap();
        format!("{grant}.99999999999999.{mac}")
    };
    let e = o.env.service.authenticate(&forged).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated);
}

#[tokio::test]
async fn refresh_tokens_rotate_and_a_reused_one_revokes_the_grant() {
    let o = served(true).await;
    let client = o.client("Claude").await;
    let other = o.client("Other").await;
    let session = o.sign_in("alice").await;
    let code = o.consent(&session, &client, "claude").await;
    let (_, first) = o.exchange(&client, &code).await;
    let refresh = first["refresh_token"].as_str().unwrap();
    // Another client's refresh token is refused and changes nothing.
    let (status, body) = o.refresh(&other, refresh).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let (status, body) = o
        .token(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh),
            ("client_id", &client),
            ("resource", "https://elsewhere.example/mcp"),
        ])
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_target"))
    );
    let (status, second) = o.refresh(&client, refresh).await;
    assert_eq!(status, 200, "{second}");
    // The spent one again: reuse; the grant is revoked, the newest tokens die with it.
    let (status, body) = o.refresh(&client, refresh).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    let e = o
        .env
        .service
        .authenticate(second["access_token"].as_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked);
    let (status, _) = o
        .refresh(&client, second["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        o.audit_events()
            .await
            .contains(&"oauth.refresh_reused".to_owned())
    );

    // A spent token is remembered a day: replayed after that (and another rotation), it is
    // refused as unknown and the grant stands.
    let code = o.consent(&session, &client, "claude-3").await;
    let (_, a) = o.exchange(&client, &code).await;
    let (_, b) = o
        .refresh(&client, a["refresh_token"].as_str().unwrap())
        .await;
    o.env.clock.advance_secs(2 * 86_400);
    let (status, c) = o
        .refresh(&client, b["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{c}");
    let (status, body) = o
        .refresh(&client, a["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("unknown"),
        "{body}"
    );
    let (status, _) = o
        .refresh(&client, c["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "the grant stands");

    // An expired grant: its refresh token no longer works.
    let session = o.sign_in("alice").await;
    let code = o.consent(&session, &client, "claude-2").await;
    let (_, tokens) = o.exchange(&client, &code).await;
    o.env.clock.advance_secs(91 * 86_400);
    let (status, body) = o
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_grant"))
    );
}

#[tokio::test]
async fn revocation_ends_the_grant_and_unknown_tokens_change_nothing() {
    let o = served(true).await;
    let client = o.client("Claude").await;
    let other = o.client("Other").await;
    let session = o.sign_in("alice").await;
    let code = o.consent(&session, &client, "claude").await;
    let (_, tokens) = o.exchange(&client, &code).await;
    let refresh = tokens["refresh_token"].as_str().unwrap();
    for (token, client_id) in [("lsr_unknown", client.as_str()), (refresh, other.as_str())] {
        let (status, _, _) = o
            .post_form(
                "/oauth/revoke",
                None,
                &[("token", token), ("client_id", client_id)],
            )
            .await;
        assert_eq!(status, 200);
    }
    o.env
        .service
        .authenticate(tokens["access_token"].as_str().unwrap())
        .await
        .unwrap();
    let (status, _, _) = o
        .post_form(
            "/oauth/revoke",
            None,
            &[("token", refresh), ("client_id", &client)],
        )
        .await;
    assert_eq!(status, 200);
    let e = o
        .env
        .service
        .authenticate(tokens["access_token"].as_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked);
    assert!(o.audit_events().await.contains(&"oauth.revoked".to_owned()));
    // The MCP 401 of a revoked grant says invalid_token, with the metadata's address.
    let r = o
        .http
        .post(format!("{}/mcp", o.url))
        .bearer_auth(tokens["access_token"].as_str().unwrap())
        .header(CONTENT_TYPE, "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.contains("invalid_token") && challenge.contains("resource_metadata="),
        "{challenge}"
    );
}

#[tokio::test]
async fn registration_is_checked_rate_limited_and_listed_for_admins() {
    let o = served(true).await;
    for (body, error) in [
        (json!({"client_name": "x"}), "invalid_redirect_uri"),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": ["http://example.com/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [REDIRECT], "client_name": "a\nb"}),
            "invalid_client_metadata",
        ),
        (json!(["not", "an", "object"]), "invalid_client_metadata"),
    ] {
        let (status, _, answer) = o.register(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer["error"], error, "{body}: {answer}");
    }
    // A flood from one address: five an hour here, then 429 with the wait.
    let first = o.client("one").await;
    for n in 2..=5 {
        o.client(&format!("n{n}")).await;
    }
    let (status, headers, answer) = o.register(json!({"redirect_uris": [REDIRECT]})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer["error"], "temporarily_unavailable");
    assert!(headers.contains_key("retry-after"));
    o.env.clock.advance_secs(3_601);
    o.client("later").await;
    // Anyone may name a metadata document: at most 60 are read a minute.
    for i in 0..=60 {
        let (status, _, body) = o
            .get(
                &o.authorize_query(
                    &first,
                    &[("client_id", &format!("https://10.1.2.3/c{i}.json"))],
                ),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let expected = if i < 60 {
            "invalid_client"
        } else {
            "temporarily_unavailable"
        };
        assert!(body.contains(expected), "{i}: {body}");
    }
    // Admins list and remove registrations; a removed client's grants end.
    let session = o.sign_in("alice").await;
    let code = o.consent(&session, &first, "first").await;
    let (_, tokens) = o.exchange(&first, &code).await;
    let listed = o.env.service.oauth_clients(&o.env.admin).await.unwrap();
    assert_eq!(listed.len(), 6);
    let alice = o
        .env
        .caller("alice", liaison::domain::Scope::Agent, "x@y:1")
        .await;
    assert!(o.env.service.oauth_clients(&alice).await.is_err());
    o.env
        .service
        .remove_oauth_client(&o.env.admin, &first)
        .await
        .unwrap();
    let e = o
        .env
        .service
        .authenticate(tokens["access_token"].as_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenRevoked);
    let (status, _, _) = o.get(&o.authorize_query(&first, &[]), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// The registration limit holds for the deployment: two replicas on one database share one
/// count per address, refused at exactly the limit with the wait until the oldest leaves the hour.
#[tokio::test]
async fn the_registration_limit_is_shared_by_every_replica() {
    use liaison::service::{ClientMetadata, Deps, Service};
    use std::sync::Arc;
    let settings = Settings {
        oauth: OAuthSettings {
            issuer: "http://liaison.test".into(),
            resource: "http://liaison.test/mcp".into(),
            registrations_per_hour: 5,
            ..OAuthSettings::default()
        },
        ..Settings::default()
    };
    let master = || MasterKey::from_hex(crate::remotes::MASTER_HEX).unwrap();
    let db = crate::helpers::TestDb::new().await;
    let url = db.url.clone();
    let a = TestEnv::on_with_master(
        db,
        Arc::new(liaison::bus::LocalBus::default()),
        settings.clone(),
        master(),
    )
    .await;
    let b_clock = liaison::clock::ManualClock::starting_at(crate::helpers::t0());
    let b = Service::new(
        Deps::new(
            Arc::new(liaison::store::Store::open(&url).await.unwrap()),
            Arc::new(liaison::bus::LocalBus::default()),
            Arc::new(b_clock.clone()),
            settings,
            tokio_util::sync::CancellationToken::new(),
        )
        .unwrap()
        .with_master(master()),
    );
    let flooder: std::net::IpAddr = "203.0.113.7".parse().unwrap();
    let other: std::net::IpAddr = "203.0.113.8".parse().unwrap();
    let meta = || ClientMetadata {
        redirect_uris: Some(vec![REDIRECT.to_owned()]),
        ..ClientMetadata::default()
    };
    // Three on one replica, a minute apart, two on the other: five, the limit.
    for _ in 0..3 {
        a.service.oauth_register(flooder, meta()).await.unwrap();
        a.clock.advance_secs(60);
        b_clock.advance_secs(60);
    }
    for _ in 0..2 {
        b.oauth_register(flooder, meta()).await.unwrap();
    }
    // The sixth is refused on both, with the wait until the first leaves the hour.
    for replica in [&a.service, &b] {
        let e = replica.oauth_register(flooder, meta()).await.unwrap_err();
        assert_eq!(e.code.as_str(), "temporarily_unavailable", "{e:?}");
        assert_eq!(e.retry_after_s, Some(3_600 - 180), "{e:?}");
    }
    // Nothing was registered by the refusals; another address is not held back.
    assert_eq!(a.service.oauth_clients(&a.admin).await.unwrap().len(), 5);
    b.oauth_register(other, meta()).await.unwrap();
    // A second before the first is an hour old, still refused; then one more fits, only one.
    a.clock.advance_secs(3_600 - 180 - 1);
    b_clock.advance_secs(3_600 - 180 - 1);
    assert!(b.oauth_register(flooder, meta()).await.is_err());
    a.clock.advance_secs(1);
    b_clock.advance_secs(1);
    b.oauth_register(flooder, meta()).await.unwrap();
    assert!(a.service.oauth_register(flooder, meta()).await.is_err());
}

#[tokio::test]
async fn with_oauth_off_no_authorization_server_is_advertised_or_served() {
    let o = served(false).await;
    let (_, _, prm) = o.get("/.well-known/oauth-protected-resource", None).await;
    let prm: Value = serde_json::from_str(&prm).unwrap();
    assert!(prm.get("authorization_servers").is_none(), "{prm}");
    for path in [
        "/.well-known/oauth-authorization-server",
        "/oauth/authorize",
    ] {
        let (status, _, _) = o.get(path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    let (status, _, _) = o.register(json!({"redirect_uris": [REDIRECT]})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
