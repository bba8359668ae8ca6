//! Messages: the six kinds, the impact of a request, the outcome of a close, attachments and the
//! limits a message must respect.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::{ParseError, named_enum};

/// Largest body, in bytes of UTF-8 (1 MiB).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest inline attachment, in decoded bytes (4 MiB), and largest JSON data attachment once encoded.
pub const MAX_ATTACHMENT_BYTES: usize = 4 * 1024 * 1024;
/// Most attachments on one message.
pub const MAX_ATTACHMENTS: usize = 16;
/// Longest subject, in characters.
pub const MAX_SUBJECT_CHARS: usize = 300;

named_enum! {
    /// What the recipient of a message is expected to do.
    pub enum Kind ("kind") {
        Announce = "announce",
        Question = "question",
        Request = "request",
        Handoff = "handoff",
        Reply = "reply",
        Close = "close",
    }
}

impl Kind {
    /// Question, request and handoff await a reply from someone other than their author.
    pub fn awaits_reply(self) -> bool {
        matches!(self, Kind::Question | Kind::Request | Kind::Handoff)
    }

    /// Request and handoff threads can be claimed by one agent session of the recipient.
    pub fn claimable(self) -> bool {
        matches!(self, Kind::Request | Kind::Handoff)
    }

    /// Kinds that may open a new thread.
    pub fn opens_thread(self) -> bool {
        !matches!(self, Kind::Reply | Kind::Close)
    }
}

named_enum! {
    /// The effect a request asks for; it decides whether a human must approve it.
    pub enum Impact ("impact") {
        None = "none",
        Code = "code",
        Database = "database",
        Production = "production",
    }
}

named_enum! {
    /// How a closed thread ended.
    pub enum Outcome ("outcome") {
        Done = "done",
        Failed = "failed",
        Rejected = "rejected",
        Canceled = "canceled",
    }
}

/// A part attached to a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Attachment {
    /// Bytes carried in the message, base64 in JSON.
    Inline {
        filename: String,
        media_type: String,
        /// Standard base64 (RFC 4648 §4) of the bytes.
        data_base64: String,
    },
    /// A reference to content elsewhere; liaison never fetches it.
    Url {
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
    },
    /// Structured JSON data.
    Data { data: serde_json::Value },
}

impl Attachment {
    /// Checks shape and size; the error says which attachment and why.
    pub fn validate(&self, index: usize) -> Result<(), ParseError> {
        let fail = |why: String| Err(ParseError::new(format!("attachment {index}: {why}")));
        match self {
            Attachment::Inline {
                filename,
                media_type,
                data_base64,
            } => {
                if filename.trim().is_empty() || filename.len() > 255 {
                    return fail("filename must be 1-255 bytes".into());
                }
                if !media_type.contains('/') || media_type.len() > 255 {
                    return fail(format!(
                        "media_type {media_type:?} is not a media type such as text/plain"
                    ));
                }
                // Decoded size is 3/4 of the encoded size; refuse before decoding anything large.
                if data_base64.len() / 4 * 3 > MAX_ATTACHMENT_BYTES + 3 {
                    return fail(format!(
                        "inline data is larger than {MAX_ATTACHMENT_BYTES} bytes"
                    ));
                }
                match base64::engine::general_purpose::STANDARD.decode(data_base64) {
                    Ok(bytes) if bytes.len() > MAX_ATTACHMENT_BYTES => fail(format!(
                        "inline data is larger than {MAX_ATTACHMENT_BYTES} bytes"
                    )),
                    Ok(_) => Ok(()),
                    Err(e) => fail(format!("data_base64 is not standard base64: {e}")),
                }
            }
            Attachment::Url { url, .. } => {
                let scheme_ok = url.starts_with("https://") || url.starts_with("http://");
                if !scheme_ok || url.len() > 8192 {
                    return fail("url must be an http(s) URL of at most 8192 bytes".into());
                }
                Ok(())
            }
            Attachment::Data { data } => {
                let size = serde_json::to_vec(data)
                    .map(|v| v.len())
                    .unwrap_or(usize::MAX);
                if size > MAX_ATTACHMENT_BYTES {
                    return fail(format!(
                        "data is larger than {MAX_ATTACHMENT_BYTES} bytes once encoded"
                    ));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_refuse_unknown_names() {
        assert_eq!("handoff".parse::<Kind>().unwrap(), Kind::Handoff);
        let err = "order".parse::<Kind>().unwrap_err();
        assert!(err.0.contains("announce, question"), "{err}");
    }

    #[test]
    fn oversize_and_malformed_attachments_are_refused() {
        let big = Attachment::Inline {
            filename: "a.bin".into(),
            media_type: "application/octet-stream".into(),
            data_base64: "A".repeat(MAX_ATTACHMENT_BYTES * 2),
        };
        assert!(big.validate(0).is_err());
        let bad = Attachment::Inline {
            filename: "a.txt".into(),
            media_type: "text/plain".into(),
            data_base64: "not base64!".into(),
        };
        assert!(bad.validate(1).unwrap_err().0.starts_with("attachment 1"));
        let ok = Attachment::Url {
            url: "https://example.com/x".into(),
            filename: None,
            media_type: None,
        };
        assert!(ok.validate(0).is_ok());
    }
}
