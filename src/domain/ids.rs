//! Identifiers. Person and channel ids are slugs chosen by admins; message and thread ids are
//! server-made, time-ordered and prefixed so that a misplaced id is obvious in logs.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ParseError;

/// Checks a slug: 1–64 characters of `a-z`, `0-9`, `-`, `_`, starting with a letter or digit.
fn check_slug(what: &str, s: &str) -> Result<(), ParseError> {
    let valid = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && s.as_bytes()[0].is_ascii_alphanumeric();
    if valid {
        Ok(())
    } else {
        Err(ParseError::new(format!(
            "invalid {what} {s:?}: use 1-64 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
        )))
    }
}

/// Checks a connection's name (SPEC §2): 1–32 characters of `a-z`, `0-9` and `-`, starting with
/// a letter or digit (so that it can never be read as an option or a path).
fn check_connection_slug(s: &str) -> Result<(), ParseError> {
    let valid = !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.as_bytes()[0].is_ascii_alphanumeric();
    if valid {
        Ok(())
    } else {
        Err(ParseError::new(format!(
            "invalid connection name {s:?}: use 1-32 characters of a-z, 0-9 and '-', starting with a letter or digit, e.g. claude-laptop"
        )))
    }
}

/// Checks a server-made id: `prefix` then 32 hex digits.
fn check_server_id(prefix: &str, s: &str) -> Result<(), ParseError> {
    let ok = s
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_hexdigit()));
    if ok {
        Ok(())
    } else {
        Err(ParseError::new(format!(
            "invalid id {s:?}: expected {prefix}<32 hex digits>"
        )))
    }
}

/// A string newtype that can only hold what `$check` accepts; serde goes through `parse`.
macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident, $check:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Accepts any well-formed value; whether it exists (for the caller) is the store's question.
            pub fn parse(s: impl Into<String>) -> Result<Self, ParseError> {
                let s = s.into();
                let check: fn(&str) -> Result<(), ParseError> = $check;
                check(&s)?;
                Ok(Self(s))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = ParseError;
            fn try_from(s: String) -> Result<Self, ParseError> {
                Self::parse(s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_id!(
    /// A person (member or external party), e.g. `alice`.
    PersonId,
    |s| check_slug("person id", s)
);
string_id!(
    /// The name a member gave one of her agent connections (SPEC §2), e.g. `claude-laptop`:
    /// unique among her connections, shown and addressed as `alice/claude-laptop`.
    ConnectionSlug,
    check_connection_slug
);
string_id!(
    /// A channel, e.g. `demo`; or a person's personal channel, `@alice` (SPEC §4b,
    /// `domain::personal`), which only the service makes.
    ChannelName,
    |s| match s.strip_prefix('@') {
        Some(person) => check_slug("channel name", person),
        None => check_slug("channel name", s),
    }
);
string_id!(
    /// A message: `msg_` and a UUIDv7, so ids sort by creation time.
    MessageId,
    |s| check_server_id("msg_", s)
);
string_id!(
    /// A thread (an A2A task when opened by an external party): `thr_` and a UUIDv7.
    ThreadId,
    |s| check_server_id("thr_", s)
);

string_id!(
    /// An approval: `apr_` and a UUIDv7.
    ApprovalId,
    |s| check_server_id("apr_", s)
);

impl ApprovalId {
    pub fn generate() -> Self {
        Self(format!("apr_{}", uuid::Uuid::now_v7().simple()))
    }
}

impl MessageId {
    pub fn generate() -> Self {
        Self(format!("msg_{}", uuid::Uuid::now_v7().simple()))
    }
}

impl ThreadId {
    pub fn generate() -> Self {
        Self(format!("thr_{}", uuid::Uuid::now_v7().simple()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_accept_lowercase_and_refuse_the_rest() {
        assert!(PersonId::parse("alice").is_ok());
        assert!(PersonId::parse("bob-2_x").is_ok());
        for bad in ["", "Alice", "-x", "a b", "é", &"a".repeat(65)] {
            assert!(PersonId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn connection_slugs_are_short_lowercase_names() {
        for good in ["claude-laptop", "codex", "c", "0-cron", &"a".repeat(32)] {
            assert!(ConnectionSlug::parse(good).is_ok(), "{good:?}");
        }
        let bad = [
            "",
            "-x",
            "Claude",
            "a_b",
            "a b",
            "a/b",
            "é",
            "a\u{2028}b",
            &"a".repeat(33),
        ];
        for bad in bad {
            assert!(ConnectionSlug::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn server_ids_round_trip_and_refuse_other_prefixes() {
        let id = ThreadId::generate();
        assert_eq!(ThreadId::parse(id.as_str()).unwrap(), id);
        assert!(MessageId::parse(id.as_str()).is_err());
        assert!(ThreadId::parse("thr_xyz").is_err());
    }
}
