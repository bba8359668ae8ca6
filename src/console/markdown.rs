//! Message bodies as people read them (SPEC §11: "Markdown rendered safely"): CommonMark with
//! tables, strikethrough and task lists, rendered by `pulldown-cmark`, with nothing of the body
//! ever reaching the page as markup.
//!
//! Why this is safe without a separate sanitiser: `pulldown-cmark`'s writer escapes every text
//! and attribute value it writes, and emits only the tags of Markdown constructs. The only
//! markup a body can smuggle in is raw HTML (and the URLs of links and images), so here:
//! - raw HTML, inline or as a block, becomes text (a block is shown as code, as it was typed);
//! - a link keeps its `href` only when it is `http:`, `https:`, `mailto:` or a `#` fragment,
//!   and gets `rel="noopener noreferrer nofollow"`; any other (a `javascript:` or `data:` URL,
//!   a path on this server) shows as its text alone;
//! - an image is never loaded: it becomes a link to its address (under the same rule), labelled
//!   with its alt text;
//! - table cells lose their alignment, which the writer would put in a `style` attribute that
//!   the console's CSP (no inline style) refuses.
//!
//! The unit tests below check the class: whatever the input, the output holds only the tags
//! and attributes of [`ALLOWED`].

use pulldown_cmark::{
    Alignment, CodeBlockKind, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd,
};

/// What a rendered body may contain: tag names and, per tag, attribute names.
#[cfg(test)]
const ALLOWED: &[(&str, &[&str])] = &[
    ("a", &["href", "rel", "title"]),
    ("p", &[]),
    ("br", &[]),
    ("hr", &[]),
    ("em", &[]),
    ("strong", &[]),
    ("del", &[]),
    ("code", &["class"]),
    ("pre", &[]),
    ("blockquote", &["class"]),
    ("ul", &[]),
    ("ol", &["start"]),
    ("li", &[]),
    ("h1", &[]),
    ("h2", &[]),
    ("h3", &[]),
    ("h4", &[]),
    ("h5", &[]),
    ("h6", &[]),
    ("table", &[]),
    ("thead", &[]),
    ("tbody", &[]),
    ("tr", &[]),
    ("th", &[]),
    ("td", &[]),
    ("input", &["disabled", "type", "checked"]),
];

/// The body rendered as HTML, safe to put in a page as it is.
pub(super) fn render(body: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    // Per open link or image: whether its opening tag was written (its closing one follows it).
    let mut open: Vec<bool> = Vec::new();
    let events = Parser::new_ext(body, options).filter_map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::HtmlBlock) => Some(Event::Start(Tag::CodeBlock(CodeBlockKind::Indented))),
        Event::End(TagEnd::HtmlBlock) => Some(Event::End(TagEnd::CodeBlock)),
        Event::Start(Tag::Table(columns)) => Some(Event::Start(Tag::Table(
            columns.iter().map(|_| Alignment::None).collect(),
        ))),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            ..
        }) => {
            let href = if link_type == LinkType::Email {
                CowStr::from(format!("mailto:{dest_url}"))
            } else {
                dest_url
            };
            let tag = anchor(&href, &title, "");
            open.push(tag.is_some());
            tag.map(|t| Event::InlineHtml(t.into()))
        }
        Event::Start(Tag::Image {
            dest_url, title, ..
        }) => {
            let tag = anchor(&dest_url, &title, "image: ");
            open.push(tag.is_some());
            Some(Event::InlineHtml(
                tag.unwrap_or_else(|| "image: ".to_owned()).into(),
            ))
        }
        Event::End(TagEnd::Link | TagEnd::Image) => open
            .pop()
            .unwrap_or(false)
            .then(|| Event::InlineHtml("</a>".into())),
        other => Some(other),
    });
    let mut html = String::with_capacity(body.len() + body.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// The opening tag of a link to `href` (followed by `lead` as text), when `href` may be linked.
fn anchor(href: &str, title: &str, lead: &str) -> Option<String> {
    if !linkable(href) {
        return None;
    }
    let mut tag = String::from("<a href=\"");
    // Writing to a String cannot fail.
    let _ = pulldown_cmark_escape::escape_href(&mut tag, href.trim());
    if !title.is_empty() {
        tag.push_str("\" title=\"");
        let _ = pulldown_cmark_escape::escape_html(&mut tag, title);
    }
    tag.push_str("\" rel=\"noopener noreferrer nofollow\">");
    let _ = pulldown_cmark_escape::escape_html_body_text(&mut tag, lead);
    Some(tag)
}

/// Whether a link may point at `href`: web and mail addresses, and fragments of this page.
fn linkable(href: &str) -> bool {
    let h = href.trim().to_ascii_lowercase();
    ["http://", "https://", "mailto:", "#"]
        .iter()
        .any(|scheme| h.starts_with(scheme) && h.len() > scheme.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tag of `html` with its attribute names, read the way a browser's tokenizer starts:
    /// `<` then a name, attributes up to `>`. Fails on anything that is not well-formed enough
    /// to read (a `<` in text must have been escaped).
    fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
        let mut out = Vec::new();
        let mut rest = html;
        while let Some(at) = rest.find('<') {
            rest = &rest[at + 1..];
            let end = rest.find('>').expect("a tag ends");
            let inner = rest[..end].trim_end_matches('/').trim();
            rest = &rest[end + 1..];
            let inner = inner.strip_prefix('/').unwrap_or(inner);
            let (name, mut attrs) = inner.split_once(' ').unwrap_or((inner, ""));
            let mut found = Vec::new();
            while !attrs.trim().is_empty() {
                attrs = attrs.trim_start();
                let (key, after) = attrs.split_once('=').unwrap_or((attrs, ""));
                let after = after.strip_prefix('"').expect("quoted attribute");
                let close = after.find('"').expect("attribute ends");
                found.push((key.to_owned(), after[..close].to_owned()));
                attrs = &after[close + 1..];
            }
            out.push((name.to_ascii_lowercase(), found));
        }
        out
    }

    fn assert_allowed(input: &str) -> String {
        let html = render(input);
        for (name, attrs) in tags(&html) {
            let allowed = ALLOWED
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("<{name}> from {input:?}: {html}"));
            for (key, value) in attrs {
                assert!(
                    allowed.1.contains(&key.as_str()),
                    "{key} on <{name}> from {input:?}: {html}"
                );
                if key == "href" {
                    assert!(linkable(&value), "href {value:?} from {input:?}");
                }
            }
        }
        html
    }

    #[test]
    fn markdown_renders_as_people_expect() {
        let html = assert_allowed(
            "# Plan\n\n**Bump** the *TLS* library:\n\n- one\n- [x] two\n\n`code` and\n\n```\nfn x() {}\n```\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n",
        );
        assert!(html.contains("<h1>Plan</h1>"), "{html}");
        assert!(html.contains("<strong>Bump</strong>"), "{html}");
        assert!(html.contains("<li>one</li>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("<td>2</td>"), "{html}");
        assert!(!html.contains("style"), "{html}");
    }

    #[test]
    fn links_are_kept_only_to_the_web_and_mail_and_never_follow_the_reader() {
        let html = assert_allowed("[docs](https://example.com/a?b=1&c=\"2\" \"The docs\")");
        assert!(
            html.contains(
                "<a href=\"https://example.com/a?b=1&amp;c=%222%22\" title=\"The docs\" rel=\"noopener noreferrer nofollow\">docs</a>"
            ),
            "{html}"
        );
        let html = assert_allowed("<https://example.com> and <bob@example.com>");
        assert!(html.contains("href=\"mailto:bob@example.com\""), "{html}");
        for bad in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x]( javascript:alert(1))",
            "[x](java\tscript:alert(1))",
            "[x](data:text/html;base64,PHNjcmlwdD4=)",
            "[x](vbscript:msgbox)",
            "[x](/console/logout)",
            "[x](//evil.example/)",
            "<javascript:alert(1)>",
        ] {
            let html = assert_allowed(bad);
            assert!(!html.contains("<a"), "{bad}: {html}");
        }
    }

    #[test]
    fn raw_html_and_images_are_text_and_links() {
        for payload in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "a <b onmouseover=\"alert(1)\">b</b> c",
            "<div>\n<iframe src=\"https://evil.example\"></iframe>\n</div>",
            "<style>body{display:none}</style>",
            "<!-- comment --><svg onload=alert(1)>",
            "<a href=\"javascript:alert(1)\">x</a>",
            "[x](https://ok.example \"t\\\" onmouseover=\\\"alert(1)\")",
            "![x\" onerror=\"alert(1)](https://evil.example/p.png)",
            "&lt;script&gt; &#60;script&#62;",
        ] {
            let html = assert_allowed(payload);
            assert!(!html.contains("<script"), "{payload}: {html}");
            assert!(!html.contains("<img"), "{payload}: {html}");
            assert!(!html.contains("<svg"), "{payload}: {html}");
        }
        let html = assert_allowed("<script>alert(1)</script>");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        let html = assert_allowed("![diagram](https://img.example/d.png)");
        assert_eq!(
            html.trim(),
            "<p><a href=\"https://img.example/d.png\" rel=\"noopener noreferrer nofollow\">image: diagram</a></p>"
        );
        let html = assert_allowed("![diagram](javascript:alert(1))");
        assert_eq!(html.trim(), "<p>image: diagram</p>");
    }
}
