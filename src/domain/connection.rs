//! A person's agent connections (SPEC §2, §4b): what a post's `to` names, and the rights a member
//! gives each of her connections. Pure types; the rules that use them are the service's.
//!
//! An address is a person (`bob`: every connection of bob) or one connection of a person
//! (`bob/codex`). The reader of an inbox is the credential reading it: one connection (its token
//! id), or the person's own credentials (a `human` token, the console) — see [`Reader`].

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ConnectionSlug, Impact, ParseError, PersonId, named_enum};

/// One element of a post's `to`: a person, or one of a person's connections.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Address {
    /// Every connection of the person (and her own inbox readers).
    Person(PersonId),
    /// One connection of the person, by the name she gave it.
    Connection(PersonId, ConnectionSlug),
}

impl Address {
    /// `bob` or `bob/codex`; anything else is refused with what the two forms are.
    pub fn parse(s: impl Into<String>) -> Result<Self, ParseError> {
        let s = s.into();
        match s.split_once('/') {
            None => Ok(Address::Person(PersonId::parse(s)?)),
            Some((person, slug)) => Ok(Address::Connection(
                PersonId::parse(person).map_err(|e| {
                    ParseError::new(format!(
                        "{e} (an address is `person` or `person/connection`)"
                    ))
                })?,
                ConnectionSlug::parse(slug).map_err(|e| {
                    ParseError::new(format!(
                        "{e} (an address is `person` or `person/connection`)"
                    ))
                })?,
            )),
        }
    }

    /// The person this address is of.
    pub fn person(&self) -> &PersonId {
        match self {
            Address::Person(p) | Address::Connection(p, _) => p,
        }
    }
}

impl From<PersonId> for Address {
    fn from(p: PersonId) -> Self {
        Address::Person(p)
    }
}

impl TryFrom<String> for Address {
    type Error = ParseError;
    fn try_from(s: String) -> Result<Self, ParseError> {
        Address::parse(s)
    }
}

impl From<Address> for String {
    fn from(a: Address) -> String {
        a.to_string()
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Person(p) => write!(f, "{p}"),
            Address::Connection(p, c) => write!(f, "{p}/{c}"),
        }
    }
}

/// Who reads an inbox: one of the person's connections (by its credential's id, which renaming
/// does not change), or the person's own credentials (a `human` token, the console).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reader {
    Connection(String),
    Person,
}

impl Reader {
    /// The key stored with inbox entries (`reader`, `skip_reader`) and consumers: the
    /// connection's token id, or `person`. Token ids start with `tok_`, so the two never meet.
    pub fn key(&self) -> &str {
        match self {
            Reader::Connection(token) => token,
            Reader::Person => PERSON_READER,
        }
    }

    /// The name a consumer of this reader is stored under: a connection's consumers are its own
    /// (two connections using the name `claude` do not share a cursor); the person's keep their
    /// plain name. A consumer name never holds `/`, so the two forms never meet.
    pub fn consumer_key(&self, consumer: &str) -> String {
        match self {
            Reader::Connection(token) => format!("{token}/{consumer}"),
            Reader::Person => consumer.to_owned(),
        }
    }
}

/// The reader key of the person's own credentials.
pub const PERSON_READER: &str = "person";

/// The reader key of an entry no credential reads: a command withdrawn unclaimed (SPEC §4b). Its
/// entries stay (so its receipts still say who read it) but no inbox, unread count or claim sees
/// them. No token id (`tok_…`) and not [`PERSON_READER`].
pub const WITHDRAWN_READER: &str = "-withdrawn";

/// The consumer name and the connection (token id) of a stored consumer key
/// ([`Reader::consumer_key`]).
pub fn split_consumer_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((token, name)) => (Some(token), name),
        None => (None, key),
    }
}

named_enum! {
    /// What a connection may do with an impact (SPEC §4b): act on her command without more
    /// (`allowed`), ask her "allow once" each time (`confirm`), or never (`off`).
    pub enum RightLevel ("right") {
        Allowed = "allowed",
        Confirm = "confirm",
        Off = "off",
    }
}

/// A connection's rights, per impact. The defaults: `none` and `code` allowed, `database`
/// confirm, `production` off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionRights {
    #[serde(with = "level")]
    pub none: RightLevel,
    #[serde(with = "level")]
    pub code: RightLevel,
    #[serde(with = "level")]
    pub database: RightLevel,
    #[serde(with = "level")]
    pub production: RightLevel,
}

impl Default for ConnectionRights {
    fn default() -> Self {
        ConnectionRights {
            none: RightLevel::Allowed,
            code: RightLevel::Allowed,
            database: RightLevel::Confirm,
            production: RightLevel::Off,
        }
    }
}

impl ConnectionRights {
    /// The strict preset: every change confirmed, reading allowed.
    pub fn strict() -> Self {
        ConnectionRights {
            none: RightLevel::Allowed,
            code: RightLevel::Confirm,
            database: RightLevel::Confirm,
            production: RightLevel::Confirm,
        }
    }

    /// The level for one impact.
    pub fn level(&self, impact: Impact) -> RightLevel {
        match impact {
            Impact::None => self.none,
            Impact::Code => self.code,
            Impact::Database => self.database,
            Impact::Production => self.production,
        }
    }

    /// Sets the level of one impact.
    pub fn set(&mut self, impact: Impact, level: RightLevel) {
        match impact {
            Impact::None => self.none = level,
            Impact::Code => self.code = level,
            Impact::Database => self.database = level,
            Impact::Production => self.production = level,
        }
    }
}

mod level {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::RightLevel;

    pub(super) fn serialize<S: Serializer>(l: &RightLevel, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(l.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RightLevel, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_a_person_or_a_persons_connection() {
        assert_eq!(
            Address::parse("bob").unwrap(),
            Address::Person(PersonId::parse("bob").unwrap())
        );
        let a = Address::parse("alice/claude-laptop").unwrap();
        assert_eq!(a.to_string(), "alice/claude-laptop");
        assert_eq!(a.person().as_str(), "alice");
        for bad in [
            "",
            "/x",
            "alice/",
            "alice/Claude",
            "alice/a/b",
            "Alice/x",
            "a b",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rights_default_and_strict() {
        let d = ConnectionRights::default();
        assert_eq!(d.level(Impact::Code), RightLevel::Allowed);
        assert_eq!(d.level(Impact::Database), RightLevel::Confirm);
        assert_eq!(d.level(Impact::Production), RightLevel::Off);
        let s = ConnectionRights::strict();
        assert_eq!(s.level(Impact::Code), RightLevel::Confirm);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(
            json,
            r#"{"none":"allowed","code":"allowed","database":"confirm","production":"off"}"#
        );
        assert_eq!(serde_json::from_str::<ConnectionRights>(&json).unwrap(), d);
        assert!(serde_json::from_str::<ConnectionRights>(r#"{"none":"yes"}"#).is_err());
    }

    #[test]
    fn consumer_keys_of_connections_never_meet_the_persons() {
        let c = Reader::Connection("tok_abc".into());
        assert_eq!(c.consumer_key("claude"), "tok_abc/claude");
        assert_eq!(Reader::Person.consumer_key("claude"), "claude");
        assert_eq!(
            split_consumer_key("tok_abc/claude"),
            (Some("tok_abc"), "claude")
        );
        assert_eq!(split_consumer_key("claude"), (None, "claude"));
    }
}
