//! The structured result a `reply` may carry (SPEC §4): how the work ended, what was done, what it
//! changed, the checks run and links to look at. The service validates it; the console renders it
//! under the reply, MCP returns it, and A2A carries it as a `DataPart` artifact next to the text.
//!
//! Who wrote a message is [`WrittenBy`]: an agent (the default), or the person herself through the
//! console or a `human` token. The label says which (SPEC §3, "The server label").

use serde::{Deserialize, Serialize};

use super::{ParseError, named_enum};

/// Longest summary, in characters.
pub const MAX_RESULT_SUMMARY_CHARS: usize = 2_000;
/// Most entries in each of `changed`, `checks` and `links`.
pub const MAX_RESULT_ITEMS: usize = 50;
/// Longest text of one entry (a changed entity, a check's name, a link's title), in characters.
pub const MAX_RESULT_ITEM_CHARS: usize = 300;
/// Longest link, in bytes.
pub const MAX_RESULT_URL_BYTES: usize = 2_048;

named_enum! {
    /// How the work a reply reports on ended.
    pub enum ResultStatus ("result status") {
        Done = "done",
        Partial = "partial",
        Failed = "failed",
    }
}

named_enum! {
    /// How one check ended.
    pub enum CheckOutcome ("check outcome") {
        Passed = "passed",
        Failed = "failed",
        Skipped = "skipped",
    }
}

named_enum! {
    /// Who wrote a message: an agent for its person, or the person herself.
    pub enum WrittenBy ("author kind") {
        Agent = "agent",
        Human = "human",
    }
}

/// A structured result on a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyResult {
    pub status: ResultStatus,
    /// What was done, in a few sentences.
    pub summary: String,
    /// The entities the work changed: files, tables, services, tickets…
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// The checks run and how each ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// Where to look: a pull request, a dashboard, a log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<ResultLink>,
}

/// One check a reply reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub name: String,
    pub outcome: CheckOutcome,
}

/// One link a reply reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultLink {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl ReplyResult {
    /// Checks the limits and shapes; the message names the field at fault.
    pub fn validate(&self) -> Result<(), ParseError> {
        let fail = |why: String| Err(ParseError::new(format!("result: {why}")));
        let summary = self.summary.trim();
        if summary.is_empty() || self.summary.chars().count() > MAX_RESULT_SUMMARY_CHARS {
            return fail(format!(
                "summary must be 1-{MAX_RESULT_SUMMARY_CHARS} characters"
            ));
        }
        if self.summary.contains('\0') {
            return fail("summary contains a NUL character".into());
        }
        for (field, n) in [
            ("changed", self.changed.len()),
            ("checks", self.checks.len()),
            ("links", self.links.len()),
        ] {
            if n > MAX_RESULT_ITEMS {
                return fail(format!(
                    "{field} has {n} entries; at most {MAX_RESULT_ITEMS}"
                ));
            }
        }
        let item = |field: String, text: &str| {
            if text.trim().is_empty()
                || text.chars().count() > MAX_RESULT_ITEM_CHARS
                || text
                    .chars()
                    .any(|c| c.is_control() || super::text::is_line_break(c))
            {
                fail(format!(
                    "{field} must be one line of 1-{MAX_RESULT_ITEM_CHARS} characters"
                ))
            } else {
                Ok(())
            }
        };
        for (i, c) in self.changed.iter().enumerate() {
            item(format!("changed[{i}]"), c)?;
        }
        for (i, c) in self.checks.iter().enumerate() {
            item(format!("checks[{i}].name"), &c.name)?;
        }
        for (i, l) in self.links.iter().enumerate() {
            let scheme_ok = l.url.starts_with("https://") || l.url.starts_with("http://");
            if !scheme_ok
                || l.url.len() > MAX_RESULT_URL_BYTES
                || l.url
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace() || super::text::is_line_break(c))
            {
                return fail(format!(
                    "links[{i}].url must be an http(s) URL of at most {MAX_RESULT_URL_BYTES} bytes"
                ));
            }
            if let Some(title) = &l.title {
                item(format!("links[{i}].title"), title)?;
            }
        }
        Ok(())
    }

    /// One plain-text line per part, for text renderings (MCP text content, the CLI).
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!("Result: {} — {}", self.status, self.summary.trim())];
        if !self.changed.is_empty() {
            out.push(format!("Changed: {}", self.changed.join(", ")));
        }
        for c in &self.checks {
            out.push(format!("Check {}: {}", c.name, c.outcome));
        }
        for l in &self.links {
            match &l.title {
                Some(t) => out.push(format!("Link: {t} <{}>", l.url)),
                None => out.push(format!("Link: <{}>", l.url)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> ReplyResult {
        ReplyResult {
            status: ResultStatus::Done,
            summary: "Replaced the pricing table".into(),
            changed: vec!["pricing.md".into()],
            checks: vec![Check {
                name: "cargo test".into(),
                outcome: CheckOutcome::Passed,
            }],
            links: vec![ResultLink {
                url: "https://example.com/pr/1".into(),
                title: Some("PR 1".into()),
            }],
        }
    }

    #[test]
    fn a_complete_result_is_valid_and_reads_back() {
        let r = result();
        r.validate().unwrap();
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["status"], "done");
        assert_eq!(json["checks"][0]["outcome"], "passed");
        let back: ReplyResult = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.lines()[0], "Result: done — Replaced the pricing table");
    }

    #[test]
    fn each_limit_holds_at_its_edge() {
        let mut r = result();
        r.summary = "x".repeat(MAX_RESULT_SUMMARY_CHARS);
        r.validate().unwrap();
        r.summary.push('x');
        assert!(r.validate().unwrap_err().0.contains("summary"));

        let mut r = result();
        r.changed = vec!["f".into(); MAX_RESULT_ITEMS];
        r.validate().unwrap();
        r.changed.push("f".into());
        assert!(r.validate().unwrap_err().0.contains("changed has"));

        let mut r = result();
        r.changed = vec!["é".repeat(MAX_RESULT_ITEM_CHARS)];
        r.validate().unwrap();
        r.changed = vec!["é".repeat(MAX_RESULT_ITEM_CHARS + 1)];
        assert!(r.validate().is_err());
    }

    #[test]
    fn bad_shapes_are_refused_with_the_field() {
        type Breakage = fn(&mut ReplyResult);
        let cases: Vec<(Breakage, &str)> = vec![
            (|r| r.summary = "  ".into(), "summary"),
            (|r| r.summary = "a\0b".into(), "NUL"),
            (|r| r.changed = vec!["a\nb".into()], "changed[0]"),
            (|r| r.changed = vec!["a\u{2028}b".into()], "changed[0]"),
            (|r| r.checks[0].name = String::new(), "checks[0].name"),
            (
                |r| r.links[0].url = "javascript:alert(1)".into(),
                "links[0].url",
            ),
            (|r| r.links[0].url = "https://a b".into(), "links[0].url"),
            (
                |r| r.links[0].title = Some("\u{85}".into()),
                "links[0].title",
            ),
        ];
        for (break_it, field) in cases {
            let mut r = result();
            break_it(&mut r);
            let e = r.validate().unwrap_err().0;
            assert!(e.contains(field), "{e} should name {field}");
        }
        let unknown = serde_json::json!({"status": "done", "summary": "s", "extra": 1});
        assert!(serde_json::from_value::<ReplyResult>(unknown).is_err());
        let bad_status = serde_json::json!({"status": "ok", "summary": "s"});
        assert!(serde_json::from_value::<ReplyResult>(bad_status).is_err());
    }
}
