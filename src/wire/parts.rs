//! Message parts into and out of liaison's terms: text parts joined into the body, the other
//! parts (raw bytes, URLs, data) as attachments, and back. Shared by the server front and the A2A
//! client.

use base64::Engine as _;

use super::errors::{A2aError, ErrorKind};
use super::pb;
use crate::domain::Attachment;

/// Parts as liaison stores them: text parts joined into a body, the rest as attachments.
pub fn parts_in(parts: Vec<pb::Part>) -> Result<(String, Vec<Attachment>), A2aError> {
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    for (i, part) in parts.into_iter().enumerate() {
        let media_type = (!part.media_type.is_empty()).then_some(part.media_type);
        let filename = (!part.filename.is_empty()).then_some(part.filename);
        match part.content {
            Some(pb::part::Content::Text(t)) => texts.push(t),
            Some(pb::part::Content::Raw(bytes)) => attachments.push(Attachment::Inline {
                filename: filename.unwrap_or_else(|| format!("part-{i}")),
                media_type: media_type.unwrap_or_else(|| "application/octet-stream".into()),
                data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            }),
            Some(pb::part::Content::Url(url)) => attachments.push(Attachment::Url {
                url,
                filename,
                media_type,
            }),
            Some(pb::part::Content::Data(value)) => {
                let data = serde_json::to_value(&value).map_err(|e| {
                    A2aError::new(ErrorKind::InvalidParams, format!("part {i}: {e}"))
                })?;
                attachments.push(Attachment::Data { data });
            }
            None => {
                return Err(A2aError::new(
                    ErrorKind::InvalidParams,
                    format!("part {i} has no content"),
                ));
            }
        }
    }
    Ok((texts.join("\n\n"), attachments))
}

/// A message's body and attachments as parts.
pub fn parts_out(body: &str, attachments: &[Attachment]) -> Vec<pb::Part> {
    let mut parts = Vec::with_capacity(1 + attachments.len());
    if !body.is_empty() || attachments.is_empty() {
        parts.push(pb::Part {
            content: Some(pb::part::Content::Text(body.to_owned())),
            ..Default::default()
        });
    }
    for a in attachments {
        parts.push(match a {
            Attachment::Inline {
                filename,
                media_type,
                data_base64,
            } => pb::Part {
                content: Some(pb::part::Content::Raw(
                    base64::engine::general_purpose::STANDARD
                        .decode(data_base64)
                        .unwrap_or_default(),
                )),
                filename: filename.clone(),
                media_type: media_type.clone(),
                ..Default::default()
            },
            Attachment::Url {
                url,
                filename,
                media_type,
            } => pb::Part {
                content: Some(pb::part::Content::Url(url.clone())),
                filename: filename.clone().unwrap_or_default(),
                media_type: media_type.clone().unwrap_or_default(),
                ..Default::default()
            },
            Attachment::Data { data } => pb::Part {
                content: serde_json::from_value(data.clone())
                    .ok()
                    .map(pb::part::Content::Data),
                media_type: "application/json".into(),
                ..Default::default()
            },
        });
    }
    parts
}

/// A text part (for tests of every module that builds parts).
#[cfg(test)]
pub(crate) fn text_part(t: &str) -> pb::Part {
    pb::Part {
        content: Some(pb::part::Content::Text(t.into())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::text_part as text;
    use super::*;

    #[test]
    fn parts_become_body_and_attachments_and_back() {
        let data: pbjson_types::Value =
            serde_json::from_value(serde_json::json!({"a": [1, 2]})).unwrap();
        let parts = vec![
            text("first"),
            pb::Part {
                content: Some(pb::part::Content::Raw(b"\x00\x01".to_vec())),
                filename: "a.bin".into(),
                ..Default::default()
            },
            text("second"),
            pb::Part {
                content: Some(pb::part::Content::Url("https://x.test/f".into())),
                ..Default::default()
            },
            pb::Part {
                content: Some(pb::part::Content::Data(data)),
                ..Default::default()
            },
        ];
        let (body, attachments) = parts_in(parts).unwrap();
        assert_eq!(body, "first\n\nsecond");
        assert_eq!(attachments.len(), 3);
        assert!(
            matches!(&attachments[0], Attachment::Inline { filename, media_type, .. } if filename == "a.bin" && media_type == "application/octet-stream")
        );
        assert!(matches!(&attachments[2], Attachment::Data { data } if data["a"][1] == 2.0));
    }
}
