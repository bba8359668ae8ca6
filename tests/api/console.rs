//! The web console and the single-use approval links, over real HTTP against the console router
//! (service on a manual clock), on both backends: links work once, expire and go only to
//! approvers; every state change needs the right CSRF token; GET never decides; agent and
//! admin-only credentials decide nothing; sessions expire and end at logout.

use liaison::domain::{ApprovalId, ApprovalState, DecisionPath, Impact, PersonKind, Scope, Scopes};
use liaison::service::{ErrorCode, PostRequest, TokenSpec};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderMap, SET_COOKIE};

use crate::helpers::{TestEnv, pid, post};

struct Console {
    env: TestEnv,
    url: String,
    http: reqwest::Client,
    /// An admin token's secret, for the admin routes.
    admin_secret: String,
    approval: ApprovalId,
}

/// Alice asks Bob (who may approve in `demo`) for a code change; the console serves on port 0.
async fn console() -> Console {
    console_on(TestEnv::new().await, None).await
}

/// The same over `env`; served by the whole app at `served` when given, else by the console
/// router alone on port 0.
async fn console_on(env: TestEnv, served: Option<String>) -> Console {
    let alice = env.member("alice", "claude@a:1").await;
    env.member("bob", "codex@b:1").await;
    env.person("partner", PersonKind::External).await;
    env.channel("demo", &["alice", "bob"]).await;
    let posted = env
        .service
        .post(
            &alice,
            PostRequest {
                impact: Some(Impact::Code),
                to: Some(vec![pid("bob").into()]),
                ..post("request", Some("demo"), None, "Bump <b>the</b> TLS library")
            },
        )
        .await
        .unwrap();
    let approval = env
        .service
        .thread(&alice, &posted.thread, None, None)
        .await
        .unwrap()
        .approvals[0]
        .id
        .clone();
    let admin_secret = env
        .service
        .issue_token(
            &env.admin,
            TokenSpec {
                person: pid("admin"),
                scopes: Scopes::default().with(Scope::Admin),
                expires_in_s: None,
                description: String::new(),
            },
        )
        .await
        .unwrap()
        .secret;
    let url = match served {
        Some(url) => url,
        None => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let router = liaison::console::router(env.service.clone(), &url);
            tokio::spawn(async move { axum::serve(listener, router).await });
            url
        }
    };
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Console {
        env,
        url,
        http,
        admin_secret,
        approval,
    }
}

impl Console {
    async fn state(&self) -> ApprovalState {
        self.env
            .service
            .store()
            .approval(&self.approval)
            .await
            .unwrap()
            .unwrap()
            .state
    }

    async fn get(
        &self,
        path_or_url: &str,
        cookie: Option<&str>,
    ) -> (StatusCode, HeaderMap, String) {
        let url = if path_or_url.starts_with("http") {
            path_or_url.to_owned()
        } else {
            format!("{}{path_or_url}", self.url)
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
        let body = fields
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body);
        if let Some(c) = cookie {
            req = req.header(COOKIE, c);
        }
        let r = req.send().await.unwrap();
        (r.status(), r.headers().clone(), r.text().await.unwrap())
    }

    async fn admin_post(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> (StatusCode, serde_json::Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.admin_secret)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        (
            r.status(),
            serde_json::from_str(&r.text().await.unwrap()).unwrap(),
        )
    }

    /// The secret of a new token of `person` with `scope`.
    async fn secret(&self, person: &str, scope: Scope) -> String {
        let spec = TokenSpec {
            person: pid(person),
            scopes: Scopes::default().with(scope),
            expires_in_s: None,
            description: String::new(),
        };
        let issued = self.env.service.issue_token(&self.env.admin, spec).await;
        issued.unwrap().secret
    }

    /// Signs in as `person` through a login link; returns the session cookie and its CSRF token.
    async fn sign_in(&self, person: &str) -> (String, String) {
        self.sign_in_as(person, false).await
    }

    /// Signs in as `person` through an admin login link.
    async fn sign_in_admin(&self, person: &str) -> (String, String) {
        self.sign_in_as(person, true).await
    }

    async fn sign_in_as(&self, person: &str, admin: bool) -> (String, String) {
        let (status, body) = self
            .admin_post(
                "/admin/v1/login-links",
                serde_json::json!({ "person": person, "admin": admin }),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let url = body["url"].as_str().unwrap().to_owned();
        let (status, headers, html) = self.get(&url, None).await;
        assert_eq!(status, 200, "{html}");
        let form_cookie = set_cookie(&headers, "liaison_form");
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
        let session = set_cookie(&headers, "liaison_session");
        let (status, _, page) = self.get("/console/approvals", Some(&session)).await;
        assert_eq!(status, 200, "{page}");
        (session, field(&page, "csrf"))
    }
}

/// Percent-encodes a form value.
fn encode(s: &str) -> String {
    liaison::domain::text::percent_encode(s)
}

/// The value of the first hidden input named `name` in a page.
fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

/// `name=value` of the `Set-Cookie` for `name`, checking its protective attributes.
/// The one field error on `page`, which must sit by the control `id`: after it and before the
/// next field's label. Returns the error's text.
fn error_by<'a>(page: &'a str, id: &str) -> &'a str {
    let errors = page.matches("field-error").count();
    assert_eq!(
        errors,
        1,
        "one error, by a field; the page's: {:?}",
        alerts(page)
    );
    let at = page.find(&format!("id=\"{id}\"")).expect("the field");
    let field = &page[at..];
    let next_label = field.find("<label").unwrap_or(field.len());
    let Some(error) = field[..next_label].find("field-error") else {
        let error = page.find("field-error").unwrap();
        let under = page[..error]
            .rfind("<label")
            .map_or("", |l| &page[l..error]);
        panic!(
            "the error {:?} is not by the {id} field but under {}",
            alerts(page),
            under.split('>').next().unwrap_or_default()
        );
    };
    alert_text(&field[error..])
}

/// The texts of the page's alerts (field errors and the form's error).
fn alerts(page: &str) -> Vec<&str> {
    page.split("role=\"alert\"")
        .skip(1)
        .map(alert_text)
        .collect()
}

/// The text of the element whose opening tag `html` is in.
fn alert_text(html: &str) -> &str {
    let text = &html[html.find('>').unwrap() + 1..];
    &text[..text.find('<').unwrap()]
}

fn set_cookie(headers: &HeaderMap, name: &str) -> String {
    let c = headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie in {headers:?}"));
    assert!(
        c.contains("HttpOnly") && c.contains("SameSite=Strict"),
        "{c}"
    );
    c.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn an_approval_link_shows_the_action_and_decides_once_by_post_with_its_csrf_token() {
    let c = console().await;
    let (status, body) = c
        .admin_post(
            &format!("/admin/v1/approvals/{}/link", c.approval),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["link"]["person"], "bob",
        "the first approver by default"
    );
    let url = body["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with(&format!(
        "{}/console/approvals/{}?link=lsn_",
        c.url, c.approval
    )));

    // Opening it shows the exact action (escaped), and decides nothing; the page is not cached
    // nor framed.
    let (status, headers, html) = c.get(&url, None).await;
    assert_eq!(status, 200, "{html}");
    let fingerprint = c
        .env
        .service
        .store()
        .approval(&c.approval)
        .await
        .unwrap()
        .unwrap()
        .fingerprint;
    assert!(html.contains(&fingerprint));
    assert!(
        html.contains("Bump &lt;b&gt;the&lt;&#x2f;b&gt; TLS library")
            || html.contains("Bump &lt;b&gt;the&lt;/b&gt; TLS library"),
        "{html}"
    );
    assert!(!html.contains("<b>the</b>"));
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    assert_eq!(c.state().await, ApprovalState::Pending);
    let cookie = set_cookie(&headers, "liaison_form");
    let (link, csrf) = (field(&html, "link"), field(&html, "csrf"));
    let decide = format!("/console/approvals/{}/link", c.approval);

    // A GET on the deciding route, even with everything in the query, decides nothing.
    let (status, _, page) = c
        .get(
            &format!("{decide}?link={link}&csrf={csrf}&decision=allow"),
            Some(&cookie),
        )
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{page}");
    assert!(page.contains("POST"));

    // Without the token, with a wrong one, or without the page's cookie: refused.
    for (cookie, token) in [
        (Some(cookie.as_str()), ""),
        (Some(cookie.as_str()), "lsn_wrong"),
        (None, csrf.as_str()),
        (Some("liaison_form=lsn_forged"), "lsn_forged"),
    ] {
        let (status, _, page) = c
            .post_form(
                &decide,
                cookie,
                &[("link", &link), ("csrf", token), ("decision", "allow")],
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
        assert!(page.contains("CSRF"), "{page}");
    }
    // A rejection without a reason is refused before the link is used.
    let (status, _, page) = c
        .post_form(
            &decide,
            Some(&cookie),
            &[("link", &link), ("csrf", &csrf), ("decision", "reject")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert_eq!(c.state().await, ApprovalState::Pending);

    // The real form decides, as Bob, via the link path.
    let (status, _, page) = c
        .post_form(
            &decide,
            Some(&cookie),
            &[("link", &link), ("csrf", &csrf), ("decision", "allow")],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Allowed once"));
    let a = c
        .env
        .service
        .store()
        .approval(&c.approval)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.state, ApprovalState::Approved);
    assert_eq!(a.decided_by, Some(pid("bob")));
    assert_eq!(a.decided_via, Some(DecisionPath::Link));

    // Replayed, or opened again: the link is spent.
    let (status, _, page) = c
        .post_form(
            &decide,
            Some(&cookie),
            &[("link", &link), ("csrf", &csrf), ("decision", "allow")],
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{page}");
    assert!(page.contains("already used"), "{page}");
    let (status, _, page) = c.get(&url, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("already used"), "{page}");
}

#[tokio::test]
async fn an_approval_link_expires_and_is_bound_to_its_approval() {
    let c = console().await;
    let s = &c.env.service;
    let issued = s
        .issue_approval_link(&c.env.admin, &c.approval, None, None)
        .await
        .unwrap();
    // Another approval's page does not accept it.
    let other = ApprovalId::generate();
    let e = s
        .open_link(
            liaison::store::LinkKind::Approval,
            &issued.secret,
            Some(other.as_str()),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Unauthenticated);
    let (_, csrf) = s
        .open_link(
            liaison::store::LinkKind::Approval,
            &issued.secret,
            Some(c.approval.as_str()),
        )
        .await
        .unwrap();
    c.env.clock.advance_secs(3_601);
    let e = s
        .open_link(
            liaison::store::LinkKind::Approval,
            &issued.secret,
            Some(c.approval.as_str()),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenExpired, "{e}");
    let e = s
        .decide_by_link(
            &c.approval,
            &issued.secret,
            &csrf,
            Some(&csrf),
            liaison::domain::Decision::Allow,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TokenExpired, "{e}");
    assert_eq!(c.state().await, ApprovalState::Pending);
}

#[tokio::test]
async fn only_admins_issue_links_and_only_for_an_approver_of_a_pending_approval() {
    let c = console().await;
    let s = &c.env.service;
    // Alice asked; she is not an approver.
    let e = s
        .issue_approval_link(&c.env.admin, &c.approval, Some(&pid("alice")), None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(e.message.contains("not an approver"), "{e}");
    let (status, body) = c
        .admin_post(
            &format!("/admin/v1/approvals/{}/link", c.approval),
            serde_json::json!({ "for": "alice" }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    // Humans and agents do not issue links.
    for scope in [Scope::Human, Scope::Agent] {
        let bob = c.env.caller("bob", scope, "bob@x:1").await;
        let e = s
            .issue_approval_link(&bob, &c.approval, None, None)
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        let e = s
            .issue_login_link(&bob, &pid("bob"), None)
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
    }
    // Unknown approvals and persons, parties, out-of-range lifetimes.
    let e = s
        .issue_approval_link(&c.env.admin, &ApprovalId::generate(), None, None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let e = s
        .issue_login_link(&c.env.admin, &pid("nobody"), None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let e = s
        .issue_login_link(&c.env.admin, &pid("partner"), None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let e = s
        .issue_login_link(&c.env.admin, &pid("bob"), Some(5))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    // A decided approval gets no link.
    let bob = c.env.caller("bob", Scope::Human, "bob@x:1").await;
    s.decide(
        &bob,
        &c.approval,
        liaison::domain::Decision::Allow,
        None,
        DecisionPath::Cli,
    )
    .await
    .unwrap();
    let e = s
        .issue_approval_link(&c.env.admin, &c.approval, None, None)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ApprovalDecided, "{e}");
}

#[tokio::test]
async fn agent_and_admin_only_credentials_cannot_decide_through_the_console() {
    let c = console().await;
    let agent = c.secret("bob", Scope::Agent).await;
    let allow = format!("/console/approvals/{}/allow", c.approval);
    for secret in [agent.as_str(), c.admin_secret.as_str()] {
        // As a bearer token, or as if it were a session cookie: not signed in.
        let r = c
            .http
            .post(format!("{}{allow}", c.url))
            .bearer_auth(secret)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body("")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let cookie = format!("liaison_session={secret}");
        let (status, _, page) = c.post_form(&allow, Some(&cookie), &[("csrf", "x")]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{page}");
        let (status, _, _) = c.get("/console/approvals", Some(&cookie)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(c.state().await, ApprovalState::Pending);
}

#[tokio::test]
async fn console_decisions_need_the_sessions_csrf_token_and_a_post() {
    let c = console().await;
    let (session, csrf) = c.sign_in("bob").await;
    let (_, headers, page) = c.get("/console/approvals", Some(&session)).await;
    assert!(page.contains(c.approval.as_str()), "{page}");
    assert_eq!(headers["cache-control"], "no-store");
    let allow = format!("/console/approvals/{}/allow", c.approval);
    let reject = format!("/console/approvals/{}/reject", c.approval);

    let (status, _, _) = c.get(&allow, Some(&session)).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    for token in ["", "0000", &csrf[1..]] {
        let (status, _, page) = c
            .post_form(&allow, Some(&session), &[("csrf", token)])
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
    }
    // Another session's token is not this one's.
    let (_, alice_csrf) = c.sign_in("alice").await;
    let (status, _, _) = c
        .post_form(&allow, Some(&session), &[("csrf", &alice_csrf)])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, page) = c
        .post_form(&reject, Some(&session), &[("csrf", &csrf), ("reason", " ")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert_eq!(c.state().await, ApprovalState::Pending);

    let (status, headers, _) = c
        .post_form(
            &reject,
            Some(&session),
            &[("csrf", &csrf), ("reason", "Not this week")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        headers["location"],
        format!("/console/approvals?rejected={}", c.approval)
    );
    let a = c
        .env
        .service
        .store()
        .approval(&c.approval)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.state, ApprovalState::Rejected);
    assert_eq!(a.decided_via, Some(DecisionPath::Console));
    assert_eq!(a.reason.as_deref(), Some("Not this week"));
    let (status, _, page) = c
        .post_form(&allow, Some(&session), &[("csrf", &csrf)])
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{page}");
    assert!(page.contains("already decided by Bob"), "{page}");
}

#[tokio::test]
async fn login_links_work_once_and_sessions_end_at_logout_or_expiry() {
    let c = console().await;
    let (status, body) = c
        .admin_post(
            "/admin/v1/login-links",
            serde_json::json!({ "person": "bob" }),
        )
        .await;
    assert_eq!(status, 200);
    let url = body["url"].as_str().unwrap().to_owned();
    let (_, headers, html) = c.get(&url, None).await;
    let form_cookie = set_cookie(&headers, "liaison_form");
    let (link, csrf) = (field(&html, "link"), field(&html, "csrf"));
    // Without the page's cookie, no session.
    let (status, _, _) = c
        .post_form("/console/login", None, &[("link", &link), ("csrf", &csrf)])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let login = [("link", link.as_str()), ("csrf", csrf.as_str())];
    let (status, headers, _) = c
        .post_form("/console/login", Some(&form_cookie), &login)
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let session = set_cookie(&headers, "liaison_session");
    // Replayed: refused.
    let (status, _, page) = c
        .post_form("/console/login", Some(&form_cookie), &login)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("already used"), "{page}");

    // Every page works while signed in.
    for page in [
        "/console/approvals",
        "/console/threads",
        "/console/fleet",
        "/console/leases",
    ] {
        let (status, _, html) = c.get(page, Some(&session)).await;
        assert_eq!(status, 200, "{page}: {html}");
    }
    let (_, _, page) = c.get("/console/approvals", Some(&session)).await;
    let token = field(&page, "csrf");
    // Logout needs the token; then the session is over.
    let (status, _, _) = c
        .post_form("/console/logout", Some(&session), &[("csrf", "nope")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = c.get("/console/approvals", Some(&session)).await;
    assert_eq!(status, 200);
    let (status, headers, _) = c
        .post_form("/console/logout", Some(&session), &[("csrf", &token)])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(headers[SET_COOKIE].to_str().unwrap().contains("Max-Age=0"));
    let (status, _, page) = c.get("/console/approvals", Some(&session)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("login link"), "{page}");
    let (status, _, _) = c.get("/console/events", Some(&session)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A new session lasts 12 hours.
    let (session, _) = c.sign_in("bob").await;
    c.env.clock.advance_secs(12 * 3_600 - 1);
    assert_eq!(c.get("/console/approvals", Some(&session)).await.0, 200);
    c.env.clock.advance_secs(1);
    let (status, _, page) = c.get("/console/approvals", Some(&session)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("expired"), "{page}");
    // And login links expire after an hour.
    let (_, body) = c
        .admin_post(
            "/admin/v1/login-links",
            serde_json::json!({ "person": "bob" }),
        )
        .await;
    c.env.clock.advance_secs(3_600);
    let (status, _, page) = c.get(body["url"].as_str().unwrap(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("expired"), "{page}");
}

/// One part of a multipart form: a text field, or a file (name, media type, bytes).
enum Part<'a> {
    Text(&'a str, &'a str),
    File(&'a str, &'a str, &'a str, Vec<u8>),
}

const BOUNDARY: &str = "liaison-test-boundary-7f3a";

/// A `multipart/form-data` body of `parts`, as a browser sends a form: its length is the sum of
/// the parts' framing and their bytes, so a test can size a form to the byte.
fn multipart(parts: &[Part<'_>]) -> Vec<u8> {
    let boundary = BOUNDARY;
    let mut body = Vec::new();
    for p in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match p {
            Part::Text(name, value) => {
                body.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
                );
                body.extend_from_slice(value.as_bytes());
            }
            Part::File(name, filename, media, bytes) => {
                body.extend_from_slice(
                    format!(
                        "Content-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {media}\r\n\r\n"
                    )
                    .as_bytes(),
                );
                body.extend_from_slice(bytes);
            }
        }
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

impl Console {
    /// POSTs a `multipart/form-data` form, as the console's writing forms are sent.
    async fn post_multipart(
        &self,
        path: &str,
        cookie: &str,
        parts: &[Part<'_>],
    ) -> (StatusCode, HeaderMap, String) {
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .header(
                CONTENT_TYPE,
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .header(COOKIE, cookie)
            .body(multipart(parts))
            .send()
            .await
            .unwrap();
        (r.status(), r.headers().clone(), r.text().await.unwrap())
    }

    /// How many threads `demo` holds.
    async fn threads(&self) -> usize {
        let alice = self
            .env
            .caller("alice", Scope::Human, "alice@console:9")
            .await;
        self.env
            .service
            .channel_threads(
                &alice,
                &crate::helpers::channel("demo"),
                &Default::default(),
            )
            .await
            .unwrap()
            .len()
    }
}

#[tokio::test]
async fn writing_from_the_console_refuses_bad_input_by_its_field_and_posts_nothing() {
    use liaison::domain::{MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, MAX_BODY_BYTES};
    let c = console().await;
    c.env.member("carol", "claude@c:1").await;
    c.env.channel("secret", &["bob", "carol"]).await;
    let (session, csrf) = c.sign_in("alice").await;
    let base = |body: &'static str| {
        vec![
            Part::Text("kind", "question"),
            Part::Text("channel", "demo"),
            Part::Text("body", body),
        ]
    };
    let before = c.threads().await;

    // Without the session's CSRF token: refused, nothing posted.
    let (status, _, _) = c
        .post_multipart("/console/compose", &session, &base("hi"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let with = |mut parts: Vec<Part<'static>>, csrf: &'static str| {
        parts.push(Part::Text("csrf", csrf));
        parts
    };
    let csrf: &'static str = Box::leak(csrf.into_boxed_str());

    // NUL, an empty body, a body one byte over the limit: the error sits by the body field.
    let big: &'static str = Box::leak("x".repeat(MAX_BODY_BYTES + 1).into_boxed_str());
    for body in ["a\u{0}b", "   ", big] {
        let (status, _, page) = c
            .post_multipart("/console/compose", &session, &with(base(body), csrf))
            .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{}",
            &page[..page.len().min(300)]
        );
        error_by(&page, "body");
    }
    // A file one byte over the attachment limit, and one file too many.
    let file = |n: usize| Part::File("files", "a.bin", "application/octet-stream", vec![7; n]);
    let mut over = with(base("see file"), csrf);
    over.push(file(MAX_ATTACHMENT_BYTES + 1));
    let (status, _, page) = c.post_multipart("/console/compose", &session, &over).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let error = error_by(&page, "files");
    assert!(
        error.contains(&format!("larger than {MAX_ATTACHMENT_BYTES} bytes")),
        "{error}"
    );
    let mut many = with(base("see files"), csrf);
    for _ in 0..=MAX_ATTACHMENTS {
        many.push(file(1));
    }
    let (status, _, page) = c.post_multipart("/console/compose", &session, &many).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_by(&page, "files").contains(&format!("at most {MAX_ATTACHMENTS} files")));
    // A channel she is not in is not found, like one that does not exist.
    for name in ["secret", "nowhere"] {
        let parts = vec![
            Part::Text("kind", "question"),
            Part::Text("channel", name),
            Part::Text("body", "hello"),
            Part::Text("csrf", csrf),
        ];
        let (status, _, _) = c.post_multipart("/console/compose", &session, &parts).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}");
    }
    assert_eq!(c.threads().await, before, "nothing was posted");

    // At the limits exactly: the largest body, the largest file, as many files as allowed.
    let largest: &'static str = Box::leak("y".repeat(MAX_BODY_BYTES).into_boxed_str());
    let (status, headers, _) = c
        .post_multipart("/console/compose", &session, &with(base(largest), csrf))
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        headers["location"]
            .to_str()
            .unwrap()
            .starts_with("/console/threads/thr_")
    );
    let mut full = with(base("files"), csrf);
    full.push(Part::File(
        "files",
        "page.html",
        "text/html",
        b"<script>alert(1)</script>".to_vec(),
    ));
    full.push(file(MAX_ATTACHMENT_BYTES));
    for _ in 2..MAX_ATTACHMENTS {
        full.push(file(1));
    }
    let (status, headers, page) = c.post_multipart("/console/compose", &session, &full).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{:?}", alerts(&page));
    let thread = headers["location"].to_str().unwrap().to_owned();
    assert_eq!(c.threads().await, before + 2);
    // A form the page rendered carries its own key: sent twice (a double click), it posts once.
    let mut keyed = with(base("once"), csrf);
    keyed.push(Part::Text("form_key", "console-test-key"));
    for _ in 0..2 {
        let (status, _, _) = c.post_multipart("/console/compose", &session, &keyed).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
    }
    assert_eq!(c.threads().await, before + 3, "a form's key posts once");
    let (_, _, page) = c.get("/console/compose?channel=demo", Some(&session)).await;
    assert!(field(&page, "form_key").starts_with("console-"));

    // The uploaded HTML comes back as a download, never as a page.
    let (_, _, page) = c.get(&thread, Some(&session)).await;
    // The template escapes `/` in attributes; a browser reads it back.
    let page = page.replace("&#x2f;", "/");
    let href = page
        .split("href=\"")
        .find(|s| s.starts_with("/console/messages/"))
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned();
    let (status, headers, body) = c.get(&href, Some(&session)).await;
    assert_eq!(status, 200);
    assert_eq!(headers[CONTENT_TYPE], "application/octet-stream");
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment;")
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(body, "<script>alert(1)</script>");
    // Someone else's session cannot fetch it.
    let (carol, _) = c.sign_in("carol").await;
    let (status, _, _) = c.get(&href, Some(&carol)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Answering: a GET changes nothing (it leads to the thread); a closed thread refuses a
    // reply by the form, keeping her text for a new thread that refers to it.
    let id = thread.trim_start_matches("/console/threads/");
    let (status, headers, _) = c.get(&format!("{thread}/reply"), Some(&session)).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers["location"], thread.as_str());
    let close = vec![
        Part::Text("outcome", "done"),
        Part::Text("body", ""),
        Part::Text("csrf", csrf),
    ];
    let (status, _, _) = c
        .post_multipart(&format!("{thread}/close"), &session, &close)
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let reply = vec![
        Part::Text("body", "one more thing"),
        Part::Text("csrf", csrf),
    ];
    let (status, _, page) = c
        .post_multipart(&format!("{thread}/reply"), &session, &reply)
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "{}",
        &page[..page.len().min(300)]
    );
    assert!(page.contains("This thread was closed before your answer was sent"));
    assert!(!page.contains("refers_to it"));
    assert!(
        page.contains(">one more thing</textarea>"),
        "her text is kept"
    );
    let alice = c.env.caller("alice", Scope::Human, "alice@console:9").await;
    let view = c
        .env
        .service
        .thread(
            &alice,
            &liaison::domain::ThreadId::parse(id).unwrap(),
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(view.thread.message_count, 2, "opener and close only");
    // A thread in a channel she is not in, and one that does not exist: the same answer.
    let bobs = c
        .env
        .service
        .post(
            &c.env.caller("bob", Scope::Agent, "codex@b:2").await,
            post("question", Some("secret"), None, "private"),
        )
        .await
        .unwrap();
    for other in [bobs.thread.to_string(), "thr_nothing".to_owned()] {
        let (status, _, _) = c
            .post_multipart(&format!("/console/threads/{other}/reply"), &session, &reply)
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{other}");
    }
}

/// The writing forms' size limit, all parts and their framing: what the compose page announces.
const FORM_LIMIT: usize = 16 * 1024 * 1024;

/// A writing form of exactly `size` bytes: three files of the largest size an attachment may
/// have, and a fourth sized to make up the rest; fewer files than allowed, none too large.
fn form_of_size(csrf: &str, size: usize) -> Vec<Part<'_>> {
    use liaison::domain::MAX_ATTACHMENT_BYTES;
    let mut parts = vec![
        Part::Text("kind", "question"),
        Part::Text("channel", "demo"),
        Part::Text("body", "the quarter's figures"),
        Part::Text("csrf", csrf),
    ];
    for n in 0..3 {
        parts.push(Part::File(
            "files",
            "full.bin",
            "application/octet-stream",
            vec![n; MAX_ATTACHMENT_BYTES],
        ));
    }
    let rest = |n| Part::File("files", "rest.bin", "application/octet-stream", vec![9; n]);
    parts.push(rest(0));
    let framing = multipart(&parts).len();
    parts.pop();
    parts.push(rest(size - framing));
    assert_eq!(multipart(&parts).len(), size);
    parts
}

#[tokio::test]
async fn a_writing_form_of_exactly_its_size_limit_posts_and_one_byte_more_is_refused() {
    let c = console().await;
    let (session, csrf) = c.sign_in("alice").await;
    let (_, _, page) = c.get("/console/compose?channel=demo", Some(&session)).await;
    assert!(
        page.contains("16 MiB in all"),
        "the limit the page announces"
    );
    let before = c.threads().await;

    let over = form_of_size(&csrf, FORM_LIMIT + 1);
    let (status, _, page) = c.post_multipart("/console/compose", &session, &over).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a form one byte over the limit: {:?}",
        alerts(&page)
    );
    let error = error_by(&page, "files");
    assert!(error.contains("the form is larger than 16 MiB"), "{error}");
    assert_eq!(c.threads().await, before, "nothing was posted");

    let exact = form_of_size(&csrf, FORM_LIMIT);
    let Part::File(.., last) = exact.last().unwrap() else {
        unreachable!()
    };
    let last = last.len();
    let (status, headers, page) = c.post_multipart("/console/compose", &session, &exact).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "a form of exactly the limit: {:?}",
        alerts(&page)
    );
    assert_eq!(c.threads().await, before + 1);
    // Taken whole: four attachments, the last one to the byte.
    let thread = headers["location"].to_str().unwrap().to_owned();
    let (_, _, page) = c.get(&thread, Some(&session)).await;
    let page = page.replace("&#x2f;", "/");
    let files: Vec<&str> = page
        .split("href=\"")
        .filter(|s| s.starts_with("/console/messages/"))
        .filter_map(|s| s.split('"').next())
        .collect();
    assert_eq!(files.len(), 4, "{files:?}");
    let (status, _, body) = c.get(files[3], Some(&session)).await;
    assert_eq!(status, 200);
    assert_eq!(body.len(), last);
}

/// Every admin page, and a form POST of each kind with its fields (as the pages send them).
const ADMIN_PAGES: [&str; 9] = [
    "/console/admin/people",
    "/console/admin/channels",
    "/console/admin/channels/demo",
    "/console/admin/parties",
    "/console/admin/remotes",
    "/console/admin/keys",
    "/console/admin/webhooks",
    "/console/admin/deliveries",
    "/console/admin/audit",
];

fn admin_posts() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    vec![
        (
            "/console/admin/people",
            vec![("id", "mallory"), ("display_name", "Mallory")],
        ),
        (
            "/console/admin/tokens",
            vec![("person", "bob"), ("admin", "on"), ("expires_in_days", "1")],
        ),
        ("/console/admin/links", vec![("person", "bob")]),
        ("/console/admin/people/alice/remove", vec![]),
        (
            "/console/admin/channels",
            vec![("step", "apply"), ("name", "stolen"), ("members", "bob")],
        ),
        (
            "/console/admin/channels/demo/policy",
            vec![
                ("step", "apply"),
                ("code", "auto"),
                ("approval_ttl", "10"),
                ("approval_ttl_unit", "minutes"),
            ],
        ),
        (
            "/console/admin/channels/demo/members",
            vec![("step", "apply"), ("remove", "alice")],
        ),
        (
            "/console/admin/channels/demo/remove",
            vec![("step", "apply")],
        ),
        (
            "/console/admin/parties",
            vec![
                ("id", "mallory-corp"),
                ("display_name", "Mallory Corp"),
                ("issue_token", "on"),
            ],
        ),
        ("/console/admin/parties/partner/remove", vec![]),
        (
            "/console/admin/remotes",
            vec![
                ("name", "mallory-agent"),
                ("card_url", "http://127.0.0.1:9/.well-known/agent-card.json"),
                ("channel-demo", "on"),
                ("allow_unsigned", "on"),
            ],
        ),
        (
            "/console/admin/remotes/helper/refresh",
            vec![("step", "apply"), ("accept_new_keys", "on")],
        ),
        ("/console/admin/remotes/helper/remove", vec![]),
        ("/console/admin/keys/rotate", vec![("overlap_days", "1")]),
        ("/console/admin/keys/k1/retire", vec![]),
        (
            "/console/admin/webhooks",
            vec![
                ("url", "http://127.0.0.1:9/x"),
                ("event-message.created", "on"),
            ],
        ),
        (
            "/console/admin/deliveries/retry-endpoint",
            vec![("endpoint", "webhook:wh_x")],
        ),
    ]
}

#[tokio::test]
async fn only_an_admin_session_reaches_the_admin_pages_and_nothing_else_changes_anything() {
    let c = console().await;
    let s = &c.env.service;
    let audit_len = || async {
        s.audit(
            &c.env.admin,
            &liaison::service::AuditQuery {
                limit: Some(1000),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .len()
    };
    let before = audit_len().await;
    // A member's session: every admin page and form answers as an unknown console page does
    // (an HTML page keeping her navigation).
    let (member, member_csrf) = c.sign_in("bob").await;
    let (status, _, unknown) = c.get("/console/no-such-page", Some(&member)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        unknown.contains("Not found") && unknown.contains("Sign out"),
        "{unknown}"
    );
    assert!(!unknown.contains("/console/admin"), "{unknown}");
    // A bearer token (even an admin's) opens no console session, below.
    for page in ADMIN_PAGES {
        let (status, _, body) = c.get(page, Some(&member)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
        assert_eq!(body, unknown, "{page}");
        let (status, _, body) = c.get(page, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{page}: {body}");
        assert!(!body.contains("csrf"), "{page}");
        let r = c
            .http
            .get(format!("{}{page}", c.url))
            .bearer_auth(&c.admin_secret)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            StatusCode::UNAUTHORIZED,
            "a bearer token is not a session"
        );
    }
    for (path, fields) in admin_posts() {
        let mut with = fields.clone();
        with.push(("csrf", member_csrf.as_str()));
        let (status, _, body) = c.post_form(path, Some(&member), &with).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(body, unknown, "{path}");
        // Signed out: the sign-in page, as for any console page.
        let (status, _, _) = c.post_form(path, None, &with).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    // The admin's own session: without its CSRF token (a stolen cookie), nothing changes.
    let (admin, csrf) = c.sign_in_admin("admin").await;
    let after_sign_in = audit_len().await;
    assert_eq!(
        after_sign_in,
        before + 2,
        "two login links were issued, nothing else"
    );
    // Everything the admin pages show, which is everything an admin may change (on the manual
    // clock nothing on them moves by itself): the witness that nothing changed, audited or not.
    let shown = || async {
        let mut all = Vec::new();
        for page in ADMIN_PAGES {
            let (status, _, body) = c.get(page, Some(&admin)).await;
            assert_eq!(status, 200, "{page}: {body}");
            all.push((page, body));
        }
        all
    };
    let seen = shown().await;
    for (path, fields) in admin_posts() {
        let (status, _, _) = c.post_form(path, Some(&admin), &fields).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        let mut wrong = fields.clone();
        wrong.push(("csrf", member_csrf.as_str()));
        let (status, _, _) = c.post_form(path, Some(&admin), &wrong).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        // And a GET on a form's address is the page at that address, or leads to the admin
        // page holding the form; it changes nothing (below).
        let (status, headers, _) = c.get(path, Some(&admin)).await;
        if ADMIN_PAGES.contains(&path) {
            assert_eq!(status, StatusCode::OK, "{path}");
        } else {
            assert_eq!(status, StatusCode::SEE_OTHER, "{path}");
            let to = headers["location"].to_str().unwrap();
            assert!(to.starts_with("/console/admin/"), "{path} -> {to}");
        }
    }
    assert_eq!(audit_len().await, after_sign_in, "nothing changed");
    for ((page, was), (_, is)) in seen.iter().zip(shown().await) {
        let changed = was.lines().zip(is.lines()).find(|(a, b)| a != b);
        assert!(*was == is, "{page} changed: {changed:?}");
    }
    assert!(s.store().person(&pid("mallory")).await.unwrap().is_none());
    assert!(s.store().person(&pid("alice")).await.unwrap().is_some());
    assert!(
        s.store()
            .person(&pid("mallory-corp"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(s.store().party(&pid("partner")).await.unwrap().is_some());
    assert!(
        s.store()
            .person(&pid("mallory-agent"))
            .await
            .unwrap()
            .is_none()
    );
    let demo = s.list_all_channels(&c.env.admin).await.unwrap();
    assert_eq!(demo.len(), 1);
    assert!(demo[0].removed_at.is_none());
    assert_eq!(demo[0].members.len(), 2);
    for page in ADMIN_PAGES {
        let (status, _, body) = c.get(page, Some(&admin)).await;
        assert_eq!(status, 200, "{page}: {body}");
    }
    let _ = csrf;
}

#[tokio::test]
async fn an_admin_works_from_the_console_and_every_change_is_audited_via_console() {
    let c = console().await;
    let s = &c.env.service;
    let (admin, csrf) = c.sign_in_admin("admin").await;
    // A person: a bad id is refused next to its field with the values kept.
    let (status, _, page) = c
        .post_form(
            "/console/admin/people",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("id", "Not A Slug"),
                ("display_name", "Carol"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(
        page.contains("must be a slug") && page.contains("value=\"Carol\""),
        "{page}"
    );
    let (status, headers, _) = c
        .post_form(
            "/console/admin/people",
            Some(&admin),
            &[("csrf", &csrf), ("id", "carol"), ("display_name", "Carol")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{headers:?}");
    // A token: its secret shown once.
    let (status, _, page) = c
        .post_form(
            "/console/admin/tokens",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("person", "carol"),
                ("human", "on"),
                ("expires_in_days", "7"),
                ("description", "carol's browser"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    let secret = page
        .split("id=\"secret\">")
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap()
        .to_owned();
    assert!(secret.len() > 20, "{secret}");
    let carol = s.authenticate(&secret).await.unwrap();
    assert!(carol.scopes.contains(Scope::Human));
    let (_, _, again) = c.get("/console/admin/people", Some(&admin)).await;
    assert!(!again.contains(&secret), "a secret is shown once");
    // A channel: the preview changes nothing; a refused one shows the service's reason.
    let (status, _, page) = c
        .post_form(
            "/console/admin/channels",
            Some(&admin),
            &[("csrf", &csrf), ("name", "ops"), ("member-carol", "on")],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Apply"), "{page}");
    assert_eq!(s.list_all_channels(&c.env.admin).await.unwrap().len(), 1);
    let (status, _, page) = c
        .post_form(
            "/console/admin/channels",
            Some(&admin),
            &[("csrf", &csrf), ("name", "demo")],
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{page}");
    assert!(page.contains("already exists"), "{page}");
    let (status, _, _) = c
        .post_form(
            "/console/admin/channels",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("step", "apply"),
                ("name", "ops"),
                ("members", "carol"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    // A policy change that leaves no approver is refused with the reason, and changes nothing.
    let (status, _, _) = c
        .post_form(
            "/console/admin/channels/ops/members",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("step", "apply"),
                ("add", "carol"),
                ("read", "on"),
                ("post", "on"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let ops = s.list_all_channels(&c.env.admin).await.unwrap();
    let ops = ops.iter().find(|ch| ch.name.as_str() == "ops").unwrap();
    assert!(
        ops.members[0]
            .rights
            .contains(liaison::domain::Right::Approve)
    );
    let (status, _, page) = c
        .post_form(
            "/console/admin/channels/ops/policy",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("none", "auto"),
                ("code", "auto"),
                ("database", "approve"),
                ("production", "deny"),
                ("outbound", "approve"),
                ("approval_ttl", "10"),
                ("approval_ttl_unit", "minutes"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("&quot;code&quot;: &quot;auto&quot;"),
        "{page}"
    );
    let (status, _, _) = c
        .post_form(
            "/console/admin/channels/ops/policy",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("step", "apply"),
                ("none", "auto"),
                ("code", "auto"),
                ("database", "approve"),
                ("production", "deny"),
                ("outbound", "approve"),
                ("approval_ttl", "10"),
                ("approval_ttl_unit", "minutes"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    // Every change above is in the audit log, via the console, by the admin.
    let log = s
        .audit(
            &c.env.admin,
            &liaison::service::AuditQuery {
                actor: Some("admin".into()),
                limit: Some(1000),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let console: Vec<&str> = log
        .iter()
        .filter(|e| e.via == Some(DecisionPath::Console))
        .map(|e| e.event.as_str())
        .collect();
    assert_eq!(
        console,
        [
            "person.added",
            "token.issued",
            "channel.added",
            "channel.policy_changed"
        ]
    );
    let (status, headers, lines) = c
        .get("/console/admin/audit/export?event=channel.", Some(&admin))
        .await;
    assert_eq!(status, 200);
    assert_eq!(headers[CONTENT_TYPE], "application/jsonl");
    let lines: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "demo, ops, its policy");
    assert_eq!(lines[2]["before"]["policy"]["code"], "approve");
    assert_eq!(lines[2]["after"]["policy"]["code"], "auto");
    let _ = ErrorCode::NotFound;
}

/// `s` as the templates write it into a page (minijinja's HTML escaping).
fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;")
        .replace('/', "&#x2f;")
}

/// The text of the secret shown once on a page (`<pre class="secret" id="secret">`).
fn shown_secret(page: &str) -> String {
    page.split("id=\"secret\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no secret shown in {page}"))
        .split('<')
        .next()
        .unwrap()
        .to_owned()
}

/// The admin's entries of the audit log that came through the console, oldest first.
async fn console_audit(c: &Console) -> Vec<liaison::store::AuditRecord> {
    c.env
        .service
        .audit(
            &c.env.admin,
            &liaison::service::AuditQuery {
                actor: Some("admin".into()),
                limit: Some(1000),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.via == Some(DecisionPath::Console))
        .collect()
}

#[tokio::test]
async fn an_admin_adds_and_removes_parties_from_the_console_with_the_token_shown_once() {
    let c = console().await;
    let s = &c.env.service;
    let (admin, csrf) = c.sign_in_admin("admin").await;
    let parties = || async { s.list_parties(&c.env.admin).await.unwrap().len() };
    assert_eq!(parties().await, 1, "partner");
    // Bad input is refused next to the form, the values kept, nothing added.
    for (fields, status, says) in [
        (
            vec![("id", "Acme Corp"), ("display_name", "Acme Corp")],
            StatusCode::BAD_REQUEST,
            "must be a slug",
        ),
        (
            vec![
                ("id", "acme"),
                ("display_name", "Acme Corp"),
                ("default_skill", "nope"),
            ],
            StatusCode::BAD_REQUEST,
            "unknown skill",
        ),
        (
            vec![("id", "partner"), ("display_name", "Acme Corp")],
            StatusCode::CONFLICT,
            "already exists",
        ),
    ] {
        let mut with = fields.clone();
        with.push(("csrf", &csrf));
        let (got, _, page) = c
            .post_form("/console/admin/parties", Some(&admin), &with)
            .await;
        assert_eq!(got, status, "{page}");
        assert!(page.contains(says), "{says}: {page}");
        assert!(page.contains("value=\"Acme Corp\""), "{page}");
        assert!(!page.contains("id=\"secret\""), "{page}");
    }
    assert_eq!(parties().await, 1);
    // Added with a token: its secret is shown once, and authenticates the party.
    let (status, _, page) = c
        .post_form(
            "/console/admin/parties",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("id", "acme"),
                ("display_name", "Acme Corp"),
                ("default_skill", ""),
                ("jwt_subject", "acme-gateway"),
                ("issue_token", "on"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    // In no channel: the page says it is refused everything until it is in one.
    assert!(page.contains("acme is in no channel"), "{page}");
    let secret = shown_secret(&page);
    let acme = s.authenticate(&secret).await.unwrap();
    assert_eq!(acme.person.kind, PersonKind::External);
    assert!(acme.scopes.contains(Scope::Agent));
    // The list shows it with its settings and channels; the secret never again.
    c.env
        .service
        .change_members(
            &c.env.admin,
            &liaison::domain::ChannelName::parse("demo").unwrap(),
            liaison::service::MemberChange {
                add: vec![pid("acme")],
                rights: None,
                remove: Vec::new(),
            },
        )
        .await
        .unwrap();
    let (status, _, page) = c.get("/console/admin/parties", Some(&admin)).await;
    assert_eq!(status, 200);
    assert!(!page.contains(&secret), "a secret is shown once");
    assert!(
        page.contains("Acme Corp") && page.contains("acme-gateway"),
        "{page}"
    );
    assert!(page.contains("<span class=\"badge\">demo</span>"), "{page}");
    // Without a token, joining a channel checked on the form: added, nothing shown.
    let (status, headers, _) = c
        .post_form(
            "/console/admin/parties",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("id", "globex"),
                ("display_name", "Globex"),
                ("channel-demo", "on"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{headers:?}");
    let demo = s
        .list_all_channels(&c.env.admin)
        .await
        .unwrap()
        .into_iter()
        .find(|ch| ch.name.as_str() == "demo")
        .unwrap();
    assert!(demo.members.iter().any(|m| m.person == pid("globex")));
    // A channel that is not one refuses the whole form, keeping what was checked.
    let (status, _, page) = c
        .post_form(
            "/console/admin/parties",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("id", "initech"),
                ("display_name", "Initech"),
                ("channel-demo", "on"),
                ("channel-nope", "on"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
    assert!(
        page.contains("channel-demo\" value=\"on\" checked"),
        "{page}"
    );
    assert!(s.store().person(&pid("initech")).await.unwrap().is_none());
    assert!(
        s.list_tokens(&c.env.admin, Some(&pid("globex")))
            .await
            .unwrap()
            .is_empty()
    );
    // Removed: its token no longer works; a member is not a party.
    let (status, _, _) = c
        .post_form(
            "/console/admin/parties/acme/remove",
            Some(&admin),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(s.authenticate(&secret).await.is_err());
    let (status, _, page) = c
        .post_form(
            "/console/admin/parties/bob/remove",
            Some(&admin),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
    assert!(s.store().person(&pid("bob")).await.unwrap().is_some());
    let events: Vec<String> = console_audit(&c)
        .await
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        events,
        [
            "party.added",
            "token.issued",
            "party.added",
            "channel.members_changed",
            "party.removed"
        ]
    );
}

/// A whole liaison (its key ring, master key and signed Agent Card) on port 0, with the
/// console's people and channels; stopped when dropped.
struct Served {
    stop: tokio_util::sync::CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn served_console() -> (Console, Served) {
    served_console_with(&[]).await
}

/// [`served_console`] with the configuration's environment variables `env`.
async fn served_console_with(env: &[(&str, &str)]) -> (Console, Served) {
    use liaison::config::{Config, Overrides};
    let db = crate::helpers::TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let overrides = Overrides {
        data_dir: Some(dir.path().to_path_buf()),
        listen: Some("127.0.0.1:0".into()),
        database_url: Some(db.url.clone()),
        ..Default::default()
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    let app = liaison::app::App::build(Config::load(&overrides, env).unwrap(), stop.clone())
        .await
        .unwrap();
    let service = app.service().clone();
    let url = app.public_url().to_owned();
    let admin = service
        .authenticate(app.bootstrap_token.as_deref().unwrap())
        .await
        .unwrap();
    tokio::spawn(app.run_until_stopped());
    let env = TestEnv {
        service,
        // The app runs on the system clock: this one moves nothing, and these tests do not
        // move time.
        clock: liaison::clock::ManualClock::starting_at(crate::helpers::t0()),
        admin,
        _db: Some(db),
    };
    let c = console_on(env, Some(url)).await;
    (c, Served { stop, _dir: dir })
}

/// The `kid`s of a card's signatures, as a client decodes them.
fn signed_by(card: &[u8]) -> Vec<String> {
    let card: serde_json::Value = serde_json::from_slice(card).unwrap();
    card["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let header = base64::Engine::decode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                s["protected"].as_str().unwrap(),
            )
            .unwrap();
            serde_json::from_slice::<serde_json::Value>(&header).unwrap()["kid"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn an_admin_rotates_and_retires_keys_from_the_console_and_sees_what_clients_see() {
    let (c, _served) = served_console().await;
    let s = &c.env.service;
    let (admin, csrf) = c.sign_in_admin("admin").await;
    let public = |path: &'static str| {
        let url = format!("{}{path}", c.url);
        async move {
            reqwest::get(url)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .to_vec()
        }
    };
    let (status, _, page) = c.get("/console/admin/keys", Some(&admin)).await;
    assert_eq!(status, 200, "{page}");
    let first = s.keys(&c.env.admin).await.unwrap()[0].kid.clone();
    assert!(page.contains(&first) && page.contains("signing"), "{page}");
    // What clients get: the card's signatures and the key set, linked.
    let card = public("/.well-known/agent-card.json").await;
    assert_eq!(signed_by(&card), [first.as_str()]);
    for doc in ["/.well-known/jwks.json", "/.well-known/agent-card.json"] {
        let link = format!("href=\"{}\"", escaped(&format!("{}{doc}", c.url)));
        assert!(page.contains(&link), "{link}: {page}");
    }
    assert!(page.contains("1 signature;"), "{page}");
    let published = s.published_card(&c.env.admin).unwrap().unwrap();
    let jwks = public("/.well-known/jwks.json").await;
    assert_eq!(published.jwks.as_bytes(), jwks.as_slice(), "byte for byte");
    assert_eq!(published.signatures[0].kid.as_deref(), Some(first.as_str()));
    assert_eq!(published.signatures[0].alg.as_deref(), Some("ES256"));
    // Rotate with a 30-day overlap: two keys, both sign the card, both published.
    let (status, headers, _) = c
        .post_form(
            "/console/admin/keys/rotate",
            Some(&admin),
            &[("csrf", &csrf), ("overlap_days", "30")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{headers:?}");
    let keys = s.keys(&c.env.admin).await.unwrap();
    assert_eq!(keys.len(), 2);
    let second = keys[0].kid.clone();
    assert!(keys[0].signing && keys[1].kid == first && keys[1].retire_after.is_some());
    let (_, _, page) = c.get("/console/admin/keys", Some(&admin)).await;
    assert!(page.contains(&first) && page.contains(&second), "{page}");
    assert!(page.contains("2 signatures;"), "{page}");
    assert_eq!(page.matches("Retire now").count(), 1, "only the old key");
    let mut kids = signed_by(&public("/.well-known/agent-card.json").await);
    kids.sort();
    let mut both = vec![first.clone(), second.clone()];
    both.sort();
    assert_eq!(kids, both);
    // The signing key cannot be retired: the reason shown, nothing changed; a bad overlap too.
    let (status, _, page) = c
        .post_form(
            &format!("/console/admin/keys/{second}/retire"),
            Some(&admin),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(
        page.contains("rotate to a new key before retiring it"),
        "{page}"
    );
    let (status, _, page) = c
        .post_form(
            "/console/admin/keys/rotate",
            Some(&admin),
            &[("csrf", &csrf), ("overlap_days", "365")],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("between 0 and 90 days"), "{page}");
    assert_eq!(s.keys(&c.env.admin).await.unwrap().len(), 2);
    // Retire the old key: only the new one is left, signs and is published.
    let (status, _, _) = c
        .post_form(
            &format!("/console/admin/keys/{first}/retire"),
            Some(&admin),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, _, page) = c.get("/console/admin/keys", Some(&admin)).await;
    // The old key is listed as retired, no longer in the ring.
    let (ring, rest) = page.split_at(page.find("aria-label=\"Retired keys\"").expect(&page));
    assert!(!ring.contains(&first) && ring.contains(&second), "{page}");
    let retired = &rest[..rest.find("</table>").unwrap()];
    assert!(
        retired.contains(&first) && retired.contains("retired by an admin"),
        "{page}"
    );
    assert_eq!(
        signed_by(&public("/.well-known/agent-card.json").await),
        [second.as_str()]
    );
    // Audited via the console, with the ring before and after.
    let log = console_audit(&c).await;
    let events: Vec<&str> = log.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["key.rotated", "key.retired"]);
    let kids_of = |v: &Option<serde_json::Value>| -> Vec<String> {
        v.as_ref().unwrap()["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(kids_of(&log[0].before), [first.as_str()]);
    assert_eq!(kids_of(&log[0].after), [first.clone(), second.clone()]);
    assert_eq!(log[1].subject.as_deref(), Some(first.as_str()));
    assert_eq!(kids_of(&log[1].after), [second.as_str()]);
}

#[tokio::test]
async fn an_admin_adds_a_remote_from_its_card_and_accepts_new_keys_only_explicitly() {
    let remote = crate::remotes::RemoteApp::start().await;
    let env = TestEnv::with_master(
        liaison::service::Settings {
            outbox: crate::remotes::outbox(true),
            ..Default::default()
        },
        liaison::keys::ring::MasterKey::from_hex(crate::remotes::MASTER_HEX).unwrap(),
    )
    .await;
    let c = console_on(env, None).await;
    let s = &c.env.service;
    let (admin, csrf) = c.sign_in_admin("admin").await;
    let card_url = remote.card_url();
    // Refused before anything is stored: a bad name, an unreachable card; values kept.
    for (name, url, status, says) in [
        (
            "Helper",
            card_url.as_str(),
            StatusCode::BAD_REQUEST,
            "must be a slug",
        ),
        (
            "helper",
            "http://127.0.0.1:9/.well-known/agent-card.json",
            StatusCode::BAD_GATEWAY,
            "",
        ),
    ] {
        let (got, _, page) = c
            .post_form(
                "/console/admin/remotes",
                Some(&admin),
                &[
                    ("csrf", &csrf),
                    ("name", name),
                    ("card_url", url),
                    ("channel-demo", "on"),
                    ("auth", "bearer"),
                    ("bearer_token", &remote.party_token),
                ],
            )
            .await;
        assert_eq!(got, status, "{page}");
        assert!(
            page.contains(says) && page.contains("field-error"),
            "{page}"
        );
        assert!(
            page.contains(&format!("value=\"{}\"", escaped(url))),
            "{page}"
        );
        assert!(
            !page.contains(&remote.party_token),
            "secrets are not sent back"
        );
    }
    assert!(s.list_remotes(&c.env.admin).await.unwrap().is_empty());
    // Added: the page shows the skills and interfaces its card offers.
    let (status, _, page) = c
        .post_form(
            "/console/admin/remotes",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("name", "helper"),
                ("card_url", &card_url),
                ("channel-demo", "on"),
                ("binding", ""),
                ("auth", "bearer"),
                ("bearer_token", &remote.party_token),
            ],
        )
        .await;
    // Reviewed first: the card as it would be stored, nothing stored, the token sealed.
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Review the card of"), "{page}");
    for offered in ["request-change", "Ask the team", "JSONRPC", "signed"] {
        assert!(page.contains(offered), "{offered}: {page}");
    }
    assert!(s.list_remotes(&c.env.admin).await.unwrap().is_empty());
    assert!(!page.contains(&remote.party_token), "{page}");
    let hidden = |name: &str| {
        let at = format!("name=\"{name}\" value=\"");
        let from = page.find(&at).map(|i| i + at.len()).expect(name);
        page[from..from + page[from..].find('"').unwrap()]
            .replace("&#x2f;", "/")
            .replace("&amp;", "&")
    };
    let (reviewed, sealed) = (hidden("reviewed"), hidden("sealed_credentials"));
    // Sealed for this name only: under another, the review's credentials do not open.
    let (status, _, refused) = c
        .post_form(
            "/console/admin/remotes",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("step", "add"),
                ("name", "other"),
                ("card_url", &card_url),
                ("reviewed", &reviewed),
                ("sealed_credentials", &sealed),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.contains("review the card again"), "{refused}");
    let (status, _, page) = c
        .post_form(
            "/console/admin/remotes",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("step", "add"),
                ("name", "helper"),
                ("card_url", &card_url),
                ("channel-demo", "on"),
                ("binding", ""),
                ("reviewed", &reviewed),
                ("sealed_credentials", &sealed),
            ],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Added helper"), "{page}");
    assert!(
        page.contains("bearer"),
        "the credentials of the review: {page}"
    );
    for offered in [
        "request-change",
        "Ask the team",
        "JSONRPC",
        "HTTP+JSON",
        "GRPC",
    ] {
        assert!(page.contains(offered), "{offered}: {page}");
    }
    let pinned = s.show_remote(&c.env.admin, &pid("helper")).await.unwrap();
    assert_eq!(pinned.keys.len(), 1);
    assert_eq!(pinned.channels[0].as_str(), "demo");
    assert!(!page.contains(&remote.party_token), "{page}");
    let (_, _, list) = c.get("/console/admin/remotes", Some(&admin)).await;
    assert!(
        list.contains(&pinned.keys[0]) && list.contains(&escaped(&card_url)),
        "{list}"
    );
    // A thread delegated to it shows on its page, with how it is followed.
    let alice = c.env.caller("alice", Scope::Agent, "claude@a:2").await;
    let asked = s
        .post(
            &alice,
            PostRequest {
                to: Some(vec![pid("helper").into()]),
                ..post("question", Some("demo"), None, "Which version is deployed?")
            },
        )
        .await
        .unwrap();
    c.env.clock.advance_secs(60);
    let later = s
        .post(
            &alice,
            PostRequest {
                to: Some(vec![pid("helper").into()]),
                ..post("question", Some("demo"), None, "And in production?")
            },
        )
        .await
        .unwrap();
    let (_, _, page) = c.get("/console/admin/remotes/helper", Some(&admin)).await;
    let at = |t: &liaison::domain::ThreadId| page.find(t.as_str()).unwrap_or(usize::MAX);
    assert!(
        at(&later.thread) < at(&asked.thread),
        "newest first: {page}"
    );
    assert!(at(&asked.thread) < usize::MAX, "{page}");
    assert!(
        page.contains("not started") && page.contains("<td data-label=\"Follow\">stream</td>"),
        "{page}"
    );
    // The remote rotates its keys: a refresh shows the diff and changes nothing.
    remote.rotate_keys().await;
    let (status, _, page) = c
        .post_form(
            "/console/admin/remotes/helper/refresh",
            Some(&admin),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{page}");
    assert!(
        page.contains("Accept new keys") && page.contains("new keys"),
        "{page}"
    );
    assert!(page.contains(&pinned.keys[0]), "{page}");
    let now = s.show_remote(&c.env.admin, &pid("helper")).await.unwrap();
    assert_eq!(now.keys, pinned.keys, "nothing updated");
    assert_eq!(now.refreshed_at, pinned.refreshed_at);
    // Accepted explicitly: both keys pinned (the old one still co-signs), the change shown.
    let (status, _, page) = c
        .post_form(
            "/console/admin/remotes/helper/refresh",
            Some(&admin),
            &[
                ("csrf", &csrf),
                ("step", "apply"),
                ("accept_new_keys", "on"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("keys_added"), "{page}");
    let now = s.show_remote(&c.env.admin, &pid("helper")).await.unwrap();
    assert_eq!(now.keys.len(), 2);
    assert!(
        page.contains(&now.keys[0]) && page.contains(&now.keys[1]),
        "{page}"
    );
    let (status, _, page) = c
        .post_form(
            "/console/admin/remotes/helper/refresh",
            Some(&admin),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, 200);
    assert!(page.contains("nothing changed"), "{page}");
    // Removed: gone from the list.
    let (status, _, _) = c
        .post_form(
            "/console/admin/remotes/helper/remove",
            Some(&admin),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(s.list_remotes(&c.env.admin).await.unwrap().is_empty());
    let log = console_audit(&c).await;
    let events: Vec<&str> = log.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "remote.added",
            "remote.refreshed",
            "remote.refreshed",
            "remote.removed"
        ]
    );
    assert_eq!(log[1].after.as_ref().unwrap()["accepted_new_keys"], true);
}

/// The Activity page: one channel, or all of hers together with the totals as each table's last
/// line; a channel she is not in looks unknown, and an unknown scope is refused with its reason.
#[tokio::test]
async fn the_activity_page_shows_one_channel_or_all_of_hers_with_totals() {
    let c = console().await;
    c.env.member("carol", "codex@c:1").await;
    c.env.channel("ops", &["alice", "carol"]).await;
    c.env.channel("secret", &["bob", "carol"]).await;
    let (session, _) = c.sign_in("alice").await;

    let (status, _, page) = c.get("/console/activity?scope=all", Some(&session)).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(
            "<a href=\"/console/activity?scope=all\" aria-current=\"page\">All my channels</a>"
        ),
        "{page}"
    );
    assert!(
        page.contains("#ops</a>") && !page.contains("#secret"),
        "{page}"
    );
    // The request alice opened in demo this week, in the week's row and in the totals.
    let threads = &page[page.find("id=\"chart-threads\"").unwrap()..];
    let threads = &threads[..threads.find("</section>").unwrap()];
    let footer = &threads[threads.find("<tfoot>").unwrap()..];
    assert!(footer.contains("<th scope=\"row\">since "), "{footer}");
    assert!(
        footer.contains("<td>1</td><td>0</td><td>0</td>"),
        "{footer}"
    );

    let (status, _, page) = c.get("/console/activity?channel=ops", Some(&session)).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("aria-current=\"page\">#ops</a>"), "{page}");
    let (status, _, page) = c
        .get("/console/activity?channel=secret", Some(&session))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
    let (status, _, page) = c
        .get("/console/activity?scope=everything", Some(&session))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("use scope=all"), "{page}");
    let (status, _, page) = c
        .get(
            "/console/activity?scope=all&since=2001-01-01",
            Some(&session),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{page}");
    assert!(page.contains("366 days"), "{page}");
}

/// The live event stream of a session ends as soon as the session does: signed out, its person
/// removed, or expired (on the service's clock). Bounded at a third of the stream's own tick, so
/// a stream that only noticed at its next tick fails; nothing here times how soon it ends.
#[tokio::test]
async fn the_event_stream_ends_with_its_session() {
    let c = console().await;
    let bound = std::time::Duration::from_secs(10);
    let open = |session: String| {
        let (http, url) = (c.http.clone(), c.url.clone());
        async move {
            let r = http
                .get(format!("{url}/console/events"))
                .header(COOKIE, session)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r
        }
    };
    // Reads until the stream ends; `false` if it is still open at the bound.
    let ends = |mut r: reqwest::Response| async move {
        tokio::time::timeout(bound, async {
            while let Some(chunk) = r.chunk().await.unwrap_or(None) {
                let _ = chunk;
            }
        })
        .await
        .is_ok()
    };

    let (session, csrf) = c.sign_in("bob").await;
    let events = open(session.clone()).await;
    let (status, _, _) = c
        .post_form("/console/logout", Some(&session), &[("csrf", &csrf)])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(ends(events).await, "signed out, the stream is still open");

    let (session, _) = c.sign_in("bob").await;
    let events = open(session).await;
    c.env.clock.advance_secs(12 * 3_600);
    assert!(ends(events).await, "expired, the stream is still open");

    let (session, _) = c.sign_in("alice").await;
    let events = open(session).await;
    c.env
        .service
        .remove_person(&c.env.admin, &pid("alice"))
        .await
        .unwrap();
    assert!(
        ends(events).await,
        "its person removed, the stream is still open"
    );
}

/// Failed sign-ins cost the failing credential, not the address: from one address (127.0.0.1), a
/// flood of a bad token, of a bad console session and of requests presenting nothing each gets
/// 429 with `Retry-After` for itself, while the admin's valid token and a valid console session go
/// on working. Only many distinct bad credentials from the address trip the address's backstop.
#[tokio::test]
async fn failed_authentications_lock_out_the_failing_credential_not_its_address() {
    let (c, _served) = served_console_with(&[
        ("LIAISON_LIMITS__AUTH_FAILURES__PER_S", "1"),
        ("LIAISON_LIMITS__AUTH_FAILURES__BURST", "5"),
        ("LIAISON_LIMITS__AUTH_FAILURES_PER_ADDRESS__PER_S", "1"),
        ("LIAISON_LIMITS__AUTH_FAILURES_PER_ADDRESS__BURST", "60"),
    ])
    .await;
    let (session, _) = c.sign_in("bob").await;
    let persons = format!("{}/admin/v1/persons", c.url);
    let admin = |secret: String| c.http.get(&persons).bearer_auth(secret);
    // Sends `request()` until it is refused; every answer before is a refused credential (401).
    let until_429 = |name: &'static str, request: &dyn Fn() -> reqwest::RequestBuilder| {
        let sent: Vec<_> = (0..30).map(|_| request()).collect();
        async move {
            for req in sent {
                let r = req.send().await.unwrap();
                if r.status() == StatusCode::TOO_MANY_REQUESTS {
                    return r;
                }
                assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{name}");
            }
            panic!("{name}: never refused");
        }
    };
    let assert_refused = |name: &str, r: &reqwest::Response| {
        let wait = r.headers().get(reqwest::header::RETRY_AFTER);
        let wait: u64 = wait.unwrap().to_str().unwrap().parse().unwrap();
        assert!(wait >= 1, "{name}: {wait}");
    };
    let bad_token = until_429("a bad token", &|| admin("lsn_wrong".into())).await;
    assert_refused("a bad token", &bad_token);
    let body: serde_json::Value = bad_token.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("this credential"),
        "{body}"
    );
    let approvals = format!("{}/console/approvals", c.url);
    let bad_session = until_429("a bad console session", &|| {
        c.http
            .get(&approvals)
            .header(COOKIE, "liaison_session=lsn_signed_out")
    })
    .await;
    assert_refused("a bad console session", &bad_session);
    let nothing = until_429("nothing presented", &|| c.http.get(&persons)).await;
    assert_refused("nothing presented", &nothing);

    // The valid credentials from the same address are untouched; the bad one is still refused.
    let ok = admin(c.admin_secret.clone()).send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let (status, _, page) = c.get("/console/approvals", Some(&session)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let again = admin("lsn_wrong".into()).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::TOO_MANY_REQUESTS);

    // Many distinct bad tokens from the address: the backstop refuses the address, valid
    // credentials included, and says so.
    let mut sprayed = 0;
    loop {
        let r = admin(format!("lsn_sprayed_{sprayed}"))
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        sprayed += 1;
        assert!(sprayed < 200, "the address was never refused");
    }
    let r = admin(c.admin_secret.clone()).send().await.unwrap();
    assert_refused("the address", &r);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("from this address"),
        "{body}"
    );
}

/// A request closed while its approval is pending leaves the approver's queue on every front that
/// lists approvals, and none decides it any more: the console (its list; its allow and reject) and
/// `/api/v1` (the pending list; allow; reject) each say it was withdrawn.
#[tokio::test]
async fn a_request_closed_while_pending_leaves_the_queue_on_the_console_and_the_api() {
    let (c, _served) = served_console().await;
    let (session, csrf) = c.sign_in("bob").await;
    let human = c.secret("bob", Scope::Human).await;
    let api_pending = || async {
        let r = c
            .http
            .get(format!("{}/api/v1/approvals?pending=true", c.url))
            .bearer_auth(&human)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        r.text().await.unwrap()
    };
    let (_, _, page) = c.get("/console/approvals", Some(&session)).await;
    assert!(page.contains(c.approval.as_str()), "{page}");
    assert!(api_pending().await.contains(c.approval.as_str()));

    // Alice gives up on her request.
    let alice = c.env.caller("alice", Scope::Agent, "claude@a:2").await;
    let thread = c.env.service.store().approval(&c.approval).await.unwrap();
    let mut close = post("close", None, Some(&thread.unwrap().thread), "Never mind");
    close.outcome = Some(liaison::domain::Outcome::Canceled);
    c.env.service.post(&alice, close).await.unwrap();

    let (_, _, page) = c.get("/console/approvals", Some(&session)).await;
    assert!(!page.contains(c.approval.as_str()), "{page}");
    assert!(!api_pending().await.contains(c.approval.as_str()));
    let one = format!("/console/approvals/{}", c.approval);
    let (status, _, page) = c.get(&one, Some(&session)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("This approval is withdrawn."), "{page}");
    for (path, fields) in [
        (format!("{one}/allow"), vec![("csrf", csrf.as_str())]),
        (
            format!("{one}/reject"),
            vec![("csrf", csrf.as_str()), ("reason", "No")],
        ),
    ] {
        let (status, _, page) = c.post_form(&path, Some(&session), &fields).await;
        assert_eq!(status, StatusCode::CONFLICT, "{path}: {page}");
        assert!(page.contains("was withdrawn"), "{path}: {page}");
    }
    for (decision, body) in [
        ("allow", serde_json::json!({})),
        ("reject", serde_json::json!({"reason": "No"})),
    ] {
        let r = c
            .http
            .post(format!(
                "{}/api/v1/approvals/{}/{decision}",
                c.url, c.approval
            ))
            .bearer_auth(&human)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CONFLICT, "{decision}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "approval_decided", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("was withdrawn"),
            "{body}"
        );
    }
    assert_eq!(c.state().await, ApprovalState::Withdrawn);
}
