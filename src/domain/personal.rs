//! A person's sessions with her own agents (SPEC §4b): the private room where she writes
//! **commands** to one of her connections (or to "any of my agents") and watches each one's
//! lifecycle. Pure types; the rules are `service::personal`'s.
//!
//! In code the room is a *personal session* ([`SessionId`], `ses_…`), never just "session": the
//! console's sign-in sessions and an agent's declared `agent@host:session` are other things.
//! Its commands are threads of the person's **personal channel** ([`ChannelName::personal`],
//! `@alice`): a channel whose only member is she, made the first time she opens a session, so
//! that everything a thread has (claims, receipts, approvals, progress notes, the live console)
//! works for commands unchanged, and nobody else can read them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ChannelName, ParseError, PersonId};

/// A personal session: `ses_` and a UUIDv7.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    pub fn generate() -> Self {
        Self(format!("ses_{}", uuid::Uuid::now_v7().simple()))
    }

    /// `ses_` and 32 hex digits; anything else is refused.
    pub fn parse(s: impl Into<String>) -> Result<Self, ParseError> {
        let s = s.into();
        let ok = s
            .strip_prefix("ses_")
            .is_some_and(|r| r.len() == 32 && r.bytes().all(|b| b.is_ascii_hexdigit()));
        if ok {
            Ok(Self(s))
        } else {
            Err(ParseError::new(format!(
                "invalid session id {s:?}: expected ses_<32 hex digits>"
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SessionId {
    type Error = ParseError;
    fn try_from(s: String) -> Result<Self, ParseError> {
        Self::parse(s)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How long a join code may be used, in seconds (10 minutes).
pub const JOIN_CODE_TTL_S: i64 = 600;

/// The alphabet of join codes: Crockford's base 32 in lower case (no `i`, `l`, `o`, `u`), so a
/// code read aloud or retyped is not misread.
const CODE_ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// A new join code, `lj-` and three groups of four characters (60 random bits): single use and
/// short-lived, so guessing one is hopeless within its life.
pub fn new_join_code() -> String {
    let bytes = super::secret::random::<8>();
    let mut n = u64::from_le_bytes(bytes);
    let mut out = String::from("lj-");
    for i in 0..12 {
        if i > 0 && i % 4 == 0 {
            out.push('-');
        }
        out.push(CODE_ALPHABET[(n & 31) as usize] as char);
        n >>= 5;
    }
    out
}

/// A code as typed or pasted, in the form it was issued (trimmed, lower case), or `None` when it
/// cannot be a join code at all (the caller answers as for an unknown code).
pub fn normalize_join_code(typed: &str) -> Option<String> {
    let code = typed.trim().to_ascii_lowercase();
    let rest = code.strip_prefix("lj-")?;
    let groups: Vec<&str> = rest.split('-').collect();
    let valid = groups.len() == 3
        && groups
            .iter()
            .all(|g| g.len() == 4 && g.bytes().all(|b| CODE_ALPHABET.contains(&b)));
    valid.then_some(code)
}

/// A command's time to be picked up (claimed) when she does not say: 10 minutes.
pub const DEFAULT_COMMAND_TTL_S: i64 = 600;
/// Shortest and longest time to be picked up: one minute, one day.
pub const COMMAND_TTL_RANGE: std::ops::RangeInclusive<i64> = 60..=86_400;

/// Longest session title, in characters.
pub const MAX_SESSION_TITLE: usize = 120;

impl ChannelName {
    /// The personal channel of `person`, `@alice`: the room of her sessions with her agents.
    /// Admins cannot make or change one; ordinary channel names never start with `@`.
    pub fn personal(person: &PersonId) -> Self {
        ChannelName::parse(format!("@{person}")).expect("`@` and a person id is a channel name")
    }

    /// Whose personal channel this is, when it is one.
    pub fn personal_owner(&self) -> Option<PersonId> {
        self.as_str()
            .strip_prefix('@')
            .and_then(|p| PersonId::parse(p).ok())
    }
}

/// Where a command was written (SPEC §4b): a link, a selection, the page or surface she was on,
/// and when she captured them. All optional; carried to the agent as fenced data, never as her
/// instruction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandContext {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<String>,
    /// The page, document or surface she was on (`chapter 3`, `pricing page`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    /// When she captured the context (RFC 3339), as her application says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
}

/// Longest context selection, in characters.
pub const MAX_CONTEXT_SELECTION: usize = 20_000;
/// Longest context link, in bytes.
pub const MAX_CONTEXT_URL: usize = 8_192;
/// Longest surface name, in characters.
pub const MAX_CONTEXT_SURFACE: usize = 200;

impl CommandContext {
    /// Whether nothing is given.
    pub fn is_empty(&self) -> bool {
        self.url.is_none()
            && self.selection.is_none()
            && self.surface.is_none()
            && self.captured_at.is_none()
    }

    /// Checks each field; the error names the field (`context.url`, …) and what it must be.
    pub fn check(&self) -> Result<(), ParseError> {
        if let Some(u) = &self.url
            && (!(u.starts_with("https://") || u.starts_with("http://"))
                || u.len() > MAX_CONTEXT_URL
                || u.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(ParseError::new(format!(
                "context.url must be an http(s) URL of at most {MAX_CONTEXT_URL} bytes, without spaces"
            )));
        }
        if self
            .selection
            .as_ref()
            .is_some_and(|s| s.chars().count() > MAX_CONTEXT_SELECTION)
        {
            return Err(ParseError::new(format!(
                "context.selection is longer than {MAX_CONTEXT_SELECTION} characters"
            )));
        }
        if let Some(s) = &self.surface
            && (s.chars().count() > MAX_CONTEXT_SURFACE
                || s.chars().any(super::text::is_line_break))
        {
            return Err(ParseError::new(format!(
                "context.surface must be one line of at most {MAX_CONTEXT_SURFACE} characters"
            )));
        }
        if let Some(t) = &self.captured_at
            && chrono::DateTime::parse_from_rfc3339(t).is_err()
        {
            return Err(ParseError::new(format!(
                "context.captured_at {t:?} is not an RFC 3339 time (e.g. 2026-12-05T10:30:00Z)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_codes_have_one_form_and_survive_retyping() {
        let code = new_join_code();
        assert_eq!(code.len(), 17, "{code}");
        assert_eq!(normalize_join_code(&code).as_deref(), Some(code.as_str()));
        assert_eq!(
            normalize_join_code(&format!("  {}\n", code.to_uppercase())).as_deref(),
            Some(code.as_str())
        );
        assert_ne!(new_join_code(), code);
        for bad in [
            "",
            "lj-",
            "lj-abcd-efgh",
            "lj-abcd-efgh-jkmn-pqrs",
            "lj-abcd-efgh-jkmi",
            "xx-abcd-efgh-jkmn",
            "lj-abcd-efgh-jkm\u{2028}",
        ] {
            assert_eq!(normalize_join_code(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn personal_channels_belong_to_one_person() {
        let alice = PersonId::parse("alice").unwrap();
        let ch = ChannelName::personal(&alice);
        assert_eq!(ch.as_str(), "@alice");
        assert_eq!(ch.personal_owner(), Some(alice));
        assert_eq!(ChannelName::parse("ops").unwrap().personal_owner(), None);
        assert!(ChannelName::parse("@").is_err());
        assert!(ChannelName::parse("@@alice").is_err());
        assert!(ChannelName::parse("a@b").is_err());
    }

    #[test]
    fn session_ids_round_trip() {
        let id = SessionId::generate();
        assert_eq!(SessionId::parse(id.as_str()).unwrap(), id);
        assert!(SessionId::parse("thr_0123").is_err());
    }

    #[test]
    fn context_fields_are_checked_by_name() {
        let ok = CommandContext {
            url: Some("https://example.com/pricing".into()),
            selection: Some("| plan | price |\n| pro | 20 |".into()),
            surface: Some("pricing page".into()),
            captured_at: Some("2026-12-05T10:30:00Z".into()),
        };
        ok.check().unwrap();
        let cases = [
            (
                CommandContext {
                    url: Some("javascript:alert(1)".into()),
                    ..Default::default()
                },
                "context.url",
            ),
            (
                CommandContext {
                    surface: Some("a\u{2029}b".into()),
                    ..Default::default()
                },
                "context.surface",
            ),
            (
                CommandContext {
                    captured_at: Some("yesterday".into()),
                    ..Default::default()
                },
                "context.captured_at",
            ),
            (
                CommandContext {
                    selection: Some("x".repeat(MAX_CONTEXT_SELECTION + 1)),
                    ..Default::default()
                },
                "context.selection",
            ),
        ];
        for (c, field) in cases {
            let e = c.check().unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }
}
