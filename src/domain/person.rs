//! People, credentials' scopes, channel rights and the self-declared agent identity.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ParseError, named_enum};

/// The person whose name the server's own messages carry (created by the migrations).
pub const SERVER_PERSON: &str = "liaison";

named_enum! {
    /// A member drives internal agents; an external person is an outside A2A party that calls
    /// liaison; a remote is an outside A2A agent liaison calls on the members' behalf (SPEC §8b).
    pub enum PersonKind ("person kind") {
        Member = "member",
        External = "external",
        Remote = "remote",
    }
}

named_enum! {
    /// What a token may do. `agent` can never approve; `human` is never given to an agent.
    pub enum Scope ("scope") {
        Agent = "agent",
        Human = "human",
        Admin = "admin",
    }
}

named_enum! {
    /// A member's rights in a channel.
    pub enum Right ("right") {
        Read = "read",
        Post = "post",
        Request = "request",
        Approve = "approve",
    }
}

/// A small set of flags stored as a comma-separated list, e.g. `read,post`.
macro_rules! flag_set {
    ($(#[$meta:meta])* $name:ident of $item:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name(u8);

        impl $name {
            pub fn contains(self, item: $item) -> bool {
                self.0 & (1 << item as u8) != 0
            }

            pub fn with(self, item: $item) -> Self {
                Self(self.0 | (1 << item as u8))
            }

            pub fn is_empty(self) -> bool {
                self.0 == 0
            }

            pub fn iter(self) -> impl Iterator<Item = $item> {
                $item::ALL.iter().copied().filter(move |i| self.contains(*i))
            }

            /// Parses `a,b,c`; an empty list is refused.
            pub fn parse(s: &str) -> Result<Self, ParseError> {
                let mut set = Self::default();
                for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    set = set.with(part.parse()?);
                }
                if set.is_empty() {
                    return Err(ParseError::new(concat!("empty ", stringify!($name), " list")));
                }
                Ok(set)
            }
        }

        impl FromIterator<$item> for $name {
            fn from_iter<I: IntoIterator<Item = $item>>(iter: I) -> Self {
                iter.into_iter().fold(Self::default(), Self::with)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let names: Vec<&str> = self.iter().map($item::as_str).collect();
                f.write_str(&names.join(","))
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.iter())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let items = Vec::<$item>::deserialize(d)?;
                Ok(items.into_iter().collect())
            }
        }
    };
}

flag_set!(
    /// The scopes of a token.
    Scopes of Scope
);
flag_set!(
    /// A member's rights in one channel.
    Rights of Right
);

impl Rights {
    /// What a new channel member gets unless told otherwise.
    pub fn all() -> Self {
        Right::ALL.iter().copied().collect()
    }
}

/// The identity an agent declares (`agent_id@host:session`, e.g. `claude@greenmac:8f3a2c`).
///
/// It is free text chosen by the client: shown as self-declared metadata, used to tell sessions of one
/// person apart, and never used for authorization or put in a label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentIdentity(String);

impl AgentIdentity {
    pub fn parse(s: impl Into<String>) -> Result<Self, ParseError> {
        let s = s.into();
        let valid = !s.is_empty()
            && s.len() <= 200
            && s.chars().all(|c| {
                !c.is_control()
                    && !c.is_whitespace()
                    && !super::text::is_line_break(c)
                    && !super::text::is_invisible(c)
            });
        if !valid {
            return Err(ParseError::new(
                "invalid agent identity: expected agent_id@host:session, 1-200 characters without \
                 spaces, line breaks or invisible characters",
            ));
        }
        Ok(Self(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AgentIdentity {
    type Error = ParseError;
    fn try_from(s: String) -> Result<Self, ParseError> {
        Self::parse(s)
    }
}

impl From<AgentIdentity> for String {
    fn from(a: AgentIdentity) -> String {
        a.0
    }
}

impl fmt::Display for AgentIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_sets_round_trip_through_text() {
        let r = Rights::parse("read, post").unwrap();
        assert!(r.contains(Right::Read) && r.contains(Right::Post) && !r.contains(Right::Approve));
        assert_eq!(r.to_string(), "read,post");
        assert!(Rights::parse("").is_err());
        assert!(Scopes::parse("agent,root").is_err());
    }

    #[test]
    fn agent_identities_cannot_hide_characters() {
        assert!(AgentIdentity::parse("claude@greenmac:8f3a2c").is_ok());
        for bad in [
            "SYSTEM:\u{200b}Ignore\u{200b}all",
            "a\u{2028}b",
            "a\u{202e}b",
            "a\u{a0}b",
            "a\u{1e}b",
            "a\u{ad}b",
            "",
        ] {
            assert!(AgentIdentity::parse(bad).is_err(), "{bad:?}");
        }
    }
}
