//! The liaison envelope as an A2A extension: what one liaison tells another about a message that
//! A2A itself does not carry — its kind, a request's impact, a reply's structured result (SPEC §4) —
//! so that a request with an effect stays one across the hop and meets the receiver's approval.
//!
//! Declared in the card's `capabilities.extensions` under [`ENVELOPE_EXTENSION`]; carried in
//! `message.metadata[ENVELOPE_EXTENSION]` (and in a reply's `artifact.metadata`), with the URI in
//! the message's `extensions`. A sender uses it only with a remote whose card declares it.
//!
//! The receiver honours it only within what the sending party's skills allow, and never to weaken
//! its own envelope: [`Envelope::strengthen`] may turn the route's question into a request, or
//! raise a request's impact, never the reverse. Unknown or malformed data is ignored with a
//! warning by the front that reads it, never an error.

use serde::{Deserialize, Serialize};

use super::{Impact, Kind, ReplyResult};

/// The extension's URI (a name, not a page to fetch).
pub const ENVELOPE_EXTENSION: &str = "urn:liaison:a2a:envelope:v1";

/// The media type of the data part carrying a reply's structured result beside its text, for
/// clients that do not read the extension: its data is the result object.
pub const RESULT_MEDIA_TYPE: &str = "application/vnd.liaison.result+json";

/// What the extension says about one message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub kind: Kind,
    /// A request's impact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<Impact>,
    /// A reply's structured result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ReplyResult>,
}

impl Envelope {
    /// The envelope of a JSON value, checked as a post's fields are: an impact only on a request
    /// (which needs one), a valid result only on a reply. The error says what was wrong.
    pub fn from_json(value: serde_json::Value) -> Result<Envelope, String> {
        let e: Envelope = serde_json::from_value(value).map_err(|e| e.to_string())?;
        match (e.kind, e.impact) {
            (Kind::Request, None) => return Err("a request needs an impact".into()),
            (Kind::Request, Some(_)) | (_, None) => {}
            (other, Some(_)) => return Err(format!("impact is only for requests, not a {other}")),
        }
        if let Some(result) = &e.result {
            if e.kind != Kind::Reply {
                return Err(format!("result is only for a reply, not a {}", e.kind));
            }
            result.validate().map_err(|e| e.to_string())?;
        }
        Ok(e)
    }

    /// The envelope's JSON, as the extension carries it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The kind and impact of a message opened on a route of `kind` and `impact`, with this
    /// envelope: a request with an effect stronger than the route's makes it a request with that
    /// effect; anything else leaves the route's own.
    pub fn strengthen(&self, kind: Kind, impact: Option<Impact>) -> (Kind, Option<Impact>) {
        let asked = match (self.kind, self.impact) {
            (Kind::Request, Some(i)) if i != Impact::None => i,
            _ => return (kind, impact),
        };
        let own = if kind == Kind::Request {
            impact.unwrap_or(Impact::None)
        } else {
            Impact::None
        };
        if asked > own {
            (Kind::Request, Some(asked))
        } else {
            (kind, impact)
        }
    }

    /// Whether a route of `kind` and `impact` is the one this envelope describes.
    pub fn matches(&self, kind: Kind, impact: Option<Impact>) -> bool {
        self.kind == kind && (kind != Kind::Request || self.impact == impact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(kind: Kind, impact: Option<Impact>) -> Envelope {
        Envelope {
            kind,
            impact,
            result: None,
        }
    }

    #[test]
    fn an_envelope_only_ever_strengthens_the_route() {
        let code = env(Kind::Request, Some(Impact::Code));
        assert_eq!(
            code.strengthen(Kind::Question, None),
            (Kind::Request, Some(Impact::Code))
        );
        assert_eq!(
            code.strengthen(Kind::Request, Some(Impact::Production)),
            (Kind::Request, Some(Impact::Production)),
            "a stronger route stays as it is"
        );
        assert_eq!(
            env(Kind::Question, None).strengthen(Kind::Request, Some(Impact::Code)),
            (Kind::Request, Some(Impact::Code)),
            "a question cannot weaken a request"
        );
        assert_eq!(
            env(Kind::Request, Some(Impact::None)).strengthen(Kind::Handoff, None),
            (Kind::Handoff, None)
        );
    }

    #[test]
    fn malformed_envelopes_say_why() {
        use serde_json::json;
        for bad in [
            json!("request"),
            json!({ "kind": "order" }),
            json!({ "kind": "request" }),
            json!({ "kind": "question", "impact": "code" }),
            json!({ "kind": "question", "extra": 1 }),
            json!({ "kind": "announce", "result": { "status": "done", "summary": "x" } }),
        ] {
            assert!(Envelope::from_json(bad.clone()).is_err(), "{bad}");
        }
        let ok = Envelope::from_json(json!({ "kind": "request", "impact": "database" })).unwrap();
        assert_eq!(ok, env(Kind::Request, Some(Impact::Database)));
        assert_eq!(Envelope::from_json(ok.to_json()).unwrap(), ok);
    }
}
