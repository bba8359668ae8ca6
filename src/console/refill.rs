//! A refused form comes back with everything she typed (SPEC §11), for every console form at once
//! rather than form by form: when a POST is answered with a page (a refusal: 4xx; or a preview
//! the handler marks with [`KeepValues`]), every form of that page whose `action` is the address
//! the POST went to gets the values that were sent: text inputs and text areas their text, check
//! boxes and radio buttons their ticks, selects their choice. The page's own values (the stored
//! policy, a default expiry) never win over hers.
//!
//! What is not refilled: hidden fields (the page's CSRF token, a fresh idempotency key, the
//! channel the page was rendered for), passwords, and files, which no browser lets a page choose
//! again; a file input is followed by a note naming the files to attach again.
//!
//! Every value of a urlencoded form is checked against the storable rule here, before its
//! handler runs (a multipart form's, as `upload` reads it).
//!
//! The values come from the request itself for `application/x-www-form-urlencoded` forms; a
//! multipart form (files) is read by its handler, which hands what it read back as [`Sent`] in
//! the response's extensions. The rewrite reads the templates' own markup (every attribute value
//! escaped by the template engine, so a `>` never sits inside a tag); it imports nothing of the
//! console's pages.

use std::collections::HashMap;

use axum::body::{Body, to_bytes};
use axum::extract::{Form, FromRequest, Request};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The values of a form as it arrived: text fields by name (a name may repeat: check boxes),
/// and the names of the files it carried.
#[derive(Clone, Debug, Default)]
pub(super) struct Sent {
    pub text: HashMap<String, Vec<String>>,
    pub files: Vec<String>,
}

/// Marks a successful answer that shows a form again (a preview): it keeps her values too.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeepValues;

/// Largest urlencoded form the console reads (its forms are a few fields).
const MAX_URLENCODED_BYTES: usize = 1024 * 1024;

/// Fields that are the page's, never hers.
const NEVER: [&str; 2] = ["csrf", "form_key"];

/// The middleware: remembers what a POST sent, and refills the forms of the page it answers.
pub(super) async fn keep(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let action = request.uri().path().to_owned();
    let urlencoded = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let (request, sent) = if urlencoded {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_URLENCODED_BYTES).await else {
            return super::Page::from(crate::service::ServiceError::invalid(format!(
                "the form is larger than {} KiB; nothing was changed",
                MAX_URLENCODED_BYTES / 1024
            )))
            .into_response();
        };
        let mut copy = Request::new(Body::from(bytes.clone()));
        copy.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        *copy.method_mut() = Method::POST;
        let pairs = Form::<Vec<(String, String)>>::from_request(copy, &())
            .await
            .map(|Form(p)| p)
            .unwrap_or_default();
        let mut sent = Sent::default();
        for (k, v) in pairs {
            sent.text.entry(k).or_default().push(v);
        }
        // Every value of every form obeys the storable rule before any handler reads it.
        if let Err(e) = crate::service::storable("form", &sent.text) {
            return super::Page::from(e).into_response();
        }
        (Request::from_parts(parts, Body::from(bytes)), Some(sent))
    } else {
        (request, None)
    };
    let mut response = next.run(request).await;
    let refill =
        response.status().is_client_error() || response.extensions().get::<KeepValues>().is_some();
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    let sent = response.extensions_mut().remove::<Sent>().or(sent);
    let (true, true, Some(sent)) = (refill, html, sent) else {
        return response;
    };
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return super::Page::from(crate::service::ServiceError::new(
            crate::service::ErrorCode::Internal,
            "the page could not be rendered",
        ))
        .into_response();
    };
    let page = String::from_utf8_lossy(&bytes);
    let filled = refill_forms(&page, &action, &sent);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    Response::from_parts(parts, Body::from(filled))
}

/// `html` with every form posting to `action` refilled from `sent`.
pub(super) fn refill_forms(html: &str, action: &str, sent: &Sent) -> String {
    let mut out = String::with_capacity(html.len() + 256);
    let mut rest = html;
    while let Some(start) = find_tag(rest, "form") {
        let Some(end) = rest[start..].find('>').map(|e| start + e + 1) else {
            break;
        };
        out.push_str(&rest[..end]);
        let tag = Tag::parse(&rest[start..end]);
        rest = &rest[end..];
        let close = rest.find("</form>").unwrap_or(rest.len());
        if tag.get("action").map(unescape) == Some(action.to_owned()) {
            out.push_str(&fill(&rest[..close], sent));
        } else {
            out.push_str(&rest[..close]);
        }
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// The start of the next `<name` tag in `html`.
fn find_tag(html: &str, name: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = html[from..].find('<') {
        let at = from + i;
        let after = &html[at + 1..];
        if after.len() >= name.len()
            && after[..name.len()].eq_ignore_ascii_case(name)
            && after[name.len()..].starts_with(|c: char| c.is_ascii_whitespace() || c == '>')
        {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The inside of one form, its fields set to the values sent.
fn fill(form: &str, sent: &Sent) -> String {
    let mut out = String::with_capacity(form.len() + 128);
    let mut rest = form;
    let mut select: Option<String> = None;
    let mut seen: HashMap<String, usize> = HashMap::new();
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        rest = &rest[lt..];
        let Some(gt) = rest.find('>') else { break };
        let raw = &rest[..=gt];
        rest = &rest[gt + 1..];
        let tag = Tag::parse(raw);
        match tag.name.as_str() {
            "input" => out.push_str(&input(tag, raw, sent, &mut seen)),
            "select" => {
                select = tag
                    .get("name")
                    .map(unescape)
                    .filter(|n| sent.text.contains_key(n) && !NEVER.contains(&n.as_str()));
                out.push_str(raw);
            }
            "/select" => {
                select = None;
                out.push_str(raw);
            }
            "option" => match &select {
                Some(name) => {
                    let value = tag.get("value").map(unescape).unwrap_or_default();
                    let on = sent.text[name].contains(&value);
                    out.push_str(&tag.with_flag("selected", on).render());
                }
                None => out.push_str(raw),
            },
            "textarea" => {
                out.push_str(raw);
                let close = rest.find("</textarea>").unwrap_or(rest.len());
                let value = tag.get("name").map(unescape).and_then(|n| {
                    let i = next_index(&mut seen, &n);
                    sent.text.get(&n).and_then(|v| v.get(i)).cloned()
                });
                match value {
                    Some(v) => out.push_str(&escape(&v)),
                    None => out.push_str(&rest[..close]),
                }
                rest = &rest[close..];
            }
            _ => out.push_str(raw),
        }
    }
    out.push_str(rest);
    out
}

fn next_index(seen: &mut HashMap<String, usize>, name: &str) -> usize {
    let n = seen.entry(name.to_owned()).or_default();
    *n += 1;
    *n - 1
}

/// One `<input>`, refilled.
fn input(tag: Tag, raw: &str, sent: &Sent, seen: &mut HashMap<String, usize>) -> String {
    let kind = tag
        .get("type")
        .map(|t| unescape(t).to_ascii_lowercase())
        .unwrap_or_else(|| "text".to_owned());
    let Some(name) = tag.get("name").map(unescape) else {
        return raw.to_owned();
    };
    if NEVER.contains(&name.as_str()) {
        return raw.to_owned();
    }
    match kind.as_str() {
        "hidden" | "submit" | "button" | "reset" | "image" | "password" => raw.to_owned(),
        "file" if sent.files.is_empty() => raw.to_owned(),
        "file" => format!(
            "{raw}<span class=\"meta refill-note\">Attach again: {}. The form was refused, and a \
             browser does not send a file a second time by itself.</span>",
            escape(&sent.files.join(", "))
        ),
        "checkbox" | "radio" => {
            let value = tag
                .get("value")
                .map(unescape)
                .unwrap_or_else(|| "on".into());
            let on = sent.text.get(&name).is_some_and(|v| v.contains(&value));
            tag.with_flag("checked", on).render()
        }
        _ => {
            let i = next_index(seen, &name);
            match sent.text.get(&name).and_then(|v| v.get(i)) {
                Some(v) => tag.with_value("value", &escape(v)).render(),
                None => raw.to_owned(),
            }
        }
    }
}

/// A start tag: its name and its attributes as written (values still escaped).
struct Tag {
    name: String,
    attrs: Vec<(String, Option<String>)>,
    self_closing: bool,
}

impl Tag {
    fn parse(raw: &str) -> Tag {
        let inner = raw.trim_start_matches('<').trim_end_matches('>');
        let self_closing = inner.ends_with('/');
        let inner = inner.trim_end_matches('/');
        let name_end = inner
            .find(|c: char| c.is_ascii_whitespace())
            .unwrap_or(inner.len());
        let name = inner[..name_end].to_ascii_lowercase();
        let mut attrs = Vec::new();
        let mut s = inner[name_end..].trim_start();
        while !s.is_empty() {
            let key_end = s
                .find(|c: char| c.is_ascii_whitespace() || c == '=')
                .unwrap_or(s.len());
            let key = s[..key_end].to_ascii_lowercase();
            s = s[key_end..].trim_start();
            if let Some(after) = s.strip_prefix('=') {
                let after = after.trim_start();
                let (value, next) = match after.chars().next() {
                    Some(q @ ('"' | '\'')) => {
                        let body = &after[1..];
                        let end = body.find(q).unwrap_or(body.len());
                        (&body[..end], body.get(end + 1..).unwrap_or(""))
                    }
                    _ => {
                        let end = after
                            .find(|c: char| c.is_ascii_whitespace())
                            .unwrap_or(after.len());
                        (&after[..end], &after[end..])
                    }
                };
                attrs.push((key, Some(value.to_owned())));
                s = next.trim_start();
            } else {
                if !key.is_empty() {
                    attrs.push((key, None));
                }
                if key_end == 0 {
                    // Nothing readable: skip one character so the loop always ends.
                    s = s.get(1..).unwrap_or("").trim_start();
                }
            }
        }
        Tag {
            name,
            attrs,
            self_closing,
        }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_deref().unwrap_or(""))
    }

    /// With the boolean attribute `flag` present or absent.
    fn with_flag(mut self, flag: &str, on: bool) -> Tag {
        self.attrs.retain(|(k, _)| k != flag);
        if on {
            self.attrs.push((flag.to_owned(), None));
        }
        self
    }

    /// With `key` set to `escaped` (already escaped).
    fn with_value(mut self, key: &str, escaped: &str) -> Tag {
        self.attrs.retain(|(k, _)| k != key);
        self.attrs.push((key.to_owned(), Some(escaped.to_owned())));
        self
    }

    fn render(&self) -> String {
        let mut s = format!("<{}", self.name);
        for (k, v) in &self.attrs {
            match v {
                Some(v) => s.push_str(&format!(" {k}=\"{v}\"")),
                None => s.push_str(&format!(" {k}")),
            }
        }
        s.push_str(if self.self_closing { "/>" } else { ">" });
        s
    }
}

/// Text made safe inside an attribute value or an element.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            // As the template engine writes it, so a refilled value reads as the page's own.
            '/' => out.push_str("&#x2f;"),
            c => out.push(c),
        }
    }
    out
}

/// An attribute value as the browser reads it.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';').filter(|e| *e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..end];
        let c = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .map(|h| u32::from_str_radix(h, 16))
                .or_else(|| entity.strip_prefix('#').map(str::parse::<u32>))
                .and_then(Result::ok)
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(pairs: &[(&str, &str)], files: &[&str]) -> Sent {
        let mut s = Sent::default();
        for (k, v) in pairs {
            s.text
                .entry((*k).to_owned())
                .or_default()
                .push((*v).to_owned());
        }
        s.files = files.iter().map(|f| (*f).to_owned()).collect();
        s
    }

    const PAGE: &str = r#"<form method="post" action="/other"><input name="subject" value="x"></form>
<form class="card" method="post" action="/console/x&#x2f;y" enctype="multipart/form-data">
<input type="hidden" name="csrf" value="t"><input type="hidden" name="channel" value="ops">
<input id="s" name="subject" maxlength="300" value="">
<input type="radio" name="kind" value="question" checked><input type="radio" name="kind" value="request">
<input type="checkbox" name="to" value="bob"><input type="checkbox" name="to" value="carol" checked>
<select id="e" name="days"><option value="7">7</option><option value="90" selected>90</option></select>
<textarea id="b" name="body" rows="8">old</textarea>
<input id="f" type="file" name="files" multiple>
</form>"#;

    #[test]
    fn every_kind_of_field_gets_her_value_back_and_only_in_the_form_she_sent() {
        let s = sent(
            &[
                ("subject", "A \"quoted\" <subject>"),
                ("kind", "request"),
                ("to", "bob"),
                ("days", "7"),
                ("body", "line 1\n</textarea><script>x</script>"),
                ("csrf", "forged"),
                ("channel", "other"),
            ],
            &["big.bin"],
        );
        let out = refill_forms(PAGE, "/console/x/y", &s);
        // The other form is untouched.
        assert!(
            out.contains(r#"<form method="post" action="/other"><input name="subject" value="x">"#)
        );
        assert!(
            out.contains(r#"value="A &quot;quoted&quot; &lt;subject&gt;""#),
            "{out}"
        );
        assert!(out.contains(r#"<input type="radio" name="kind" value="request" checked>"#));
        assert!(out.contains(r#"<input type="radio" name="kind" value="question">"#));
        assert!(out.contains(r#"<input type="checkbox" name="to" value="bob" checked>"#));
        assert!(out.contains(r#"<input type="checkbox" name="to" value="carol">"#));
        assert!(
            out.contains(r#"<option value="7" selected>7</option><option value="90">90</option>"#)
        );
        assert!(out.contains(
            "line 1\n&lt;&#x2f;textarea&gt;&lt;script&gt;x&lt;&#x2f;script&gt;</textarea>"
        ));
        assert!(!out.contains("<script>"));
        // Hidden fields stay the page's.
        assert!(out.contains(r#"name="csrf" value="t""#) && !out.contains("forged"));
        assert!(out.contains(r#"name="channel" value="ops""#));
        assert!(out.contains("Attach again: big.bin."));
    }

    #[test]
    fn a_field_she_did_not_send_keeps_the_pages_value_and_unticked_boxes_are_unticked() {
        let out = refill_forms(PAGE, "/console/x/y", &sent(&[], &[]));
        assert!(out.contains(r#"<option value="90" selected>"#));
        assert!(out.contains(r#"<textarea id="b" name="body" rows="8">old</textarea>"#));
        assert!(out.contains(r#"<input type="checkbox" name="to" value="carol">"#));
        assert!(!out.contains("Attach again"));
    }

    #[test]
    fn entities_read_as_a_browser_reads_them() {
        assert_eq!(unescape("a&amp;b&#x2f;c&#47;&quot;&zz;&"), "a&b/c/\"&zz;&");
        assert_eq!(unescape(&escape("<a href='x'>&</a>")), "<a href='x'>&</a>");
    }
}
