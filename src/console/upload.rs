//! The console's writing forms as they arrive (`multipart/form-data`: text fields and files) and
//! the attachments they stored, served back for download only.
//!
//! Bounded: a form is at most [`MAX_FORM_BYTES`] (the route's body limit), at most
//! [`MAX_FIELDS`] text fields, each file at most the service's attachment limit and at most as
//! many files as a message may carry; anything past a bound is refused with the reason and
//! nothing is posted. An attachment is always sent back as a download (`Content-Disposition:
//! attachment`, `application/octet-stream`, `nosniff`, a sandboxing CSP), so an uploaded HTML
//! file can never run as a console page.

use std::collections::HashMap;

use axum::extract::multipart::{Multipart, MultipartError, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use super::session::session;
use super::{Console, Page};
use crate::domain::{Attachment, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, MessageId, text};
use crate::service::ServiceError;

/// Largest writing form, in bytes: a body and a few files.
pub(super) const MAX_FORM_BYTES: usize = 16 * 1024 * 1024;
/// Most text fields in one form.
const MAX_FIELDS: usize = 64;

/// A form's text fields (a name may repeat: checkboxes) and its files, as attachments.
#[derive(Default)]
pub(super) struct Fields {
    text: HashMap<String, Vec<String>>,
    pub(super) files: Vec<Attachment>,
    /// The names of every file the form carried, kept or refused.
    names: Vec<String>,
}

impl Fields {
    /// The first value of `name`, if any.
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.text
            .get(name)
            .and_then(|v| v.first())
            .map(String::as_str)
    }

    /// The first value of `name`, trimmed, when not empty.
    pub(super) fn filled(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty())
    }

    /// Every value of `name`.
    pub(super) fn all(&self, name: &str) -> &[String] {
        self.text.get(name).map_or(&[], Vec::as_slice)
    }

    /// What the form sent, for the page that shows it again.
    pub(super) fn sent(&self) -> super::refill::Sent {
        super::refill::Sent {
            text: self.text.clone(),
            files: self.names.clone(),
        }
    }
}

/// A form refused as it was read, with the fields read so far (shown again).
pub(super) struct Unread {
    pub error: ServiceError,
    pub fields: Fields,
}

/// Reads a writing form. A form that is not one (another content type, cut, too large, too many
/// fields or files) is refused with the reason, and with every field read: a file too large or
/// one too many is refused after the rest of the form is read, so nothing she typed is lost
/// (the writing forms put their files last, so a form cut at the size limit keeps its text).
pub(super) async fn read(form: Result<Multipart, MultipartRejection>) -> Result<Fields, Unread> {
    let mut fields = Fields::default();
    match read_into(form, &mut fields).await {
        Ok(None) => Ok(fields),
        Ok(Some(error)) | Err(error) => Err(Unread { error, fields }),
    }
}

/// Reads the form into `fields`: the first refused file (reading goes on), or the error that
/// stopped the reading.
async fn read_into(
    form: Result<Multipart, MultipartRejection>,
    fields: &mut Fields,
) -> Result<Option<ServiceError>, ServiceError> {
    let not_form = |why: String| {
        ServiceError::invalid(format!(
            "the request is not a form this page sends ({why}); nothing was posted"
        ))
    };
    // The body limit may strike between parts or inside one (a file's bytes): either way the
    // form is too large, and says so by its files.
    let cut = |e: MultipartError| {
        if e.status().as_u16() == 413 {
            ServiceError::invalid(format!(
                "the form is larger than {} MiB; attach less; nothing was posted",
                MAX_FORM_BYTES / (1024 * 1024)
            ))
        } else {
            not_form(e.body_text())
        }
    };
    let mut form = form.map_err(|e| not_form(e.body_text()))?;
    let mut refused = None;
    let mut count = 0;
    loop {
        let Some(field) = form.next_field().await.map_err(cut)? else {
            break;
        };
        count += 1;
        if count > MAX_FIELDS {
            return Err(not_form(format!("more than {MAX_FIELDS} fields")));
        }
        let name = field.name().unwrap_or_default().to_owned();
        let filename = field.file_name().map(str::to_owned);
        let media_type = field.content_type().map(str::to_owned);
        if let Some(f) = filename.as_ref().filter(|f| !f.is_empty()) {
            crate::service::storable("form.filename", f)?;
            fields.names.push(text::one_line(f));
        }
        let bytes = field.bytes().await.map_err(cut)?;
        match filename {
            // A file input left empty sends a part with no name and no bytes.
            Some(f) if f.is_empty() && bytes.is_empty() => {}
            Some(_) if refused.is_some() => {}
            Some(filename) => {
                if fields.files.len() == MAX_ATTACHMENTS {
                    refused = Some(ServiceError::invalid(format!(
                        "at most {MAX_ATTACHMENTS} files per message; nothing was posted"
                    )));
                    continue;
                }
                if bytes.len() > MAX_ATTACHMENT_BYTES {
                    refused = Some(ServiceError::invalid(format!(
                        "attachment {}: {} is larger than {MAX_ATTACHMENT_BYTES} bytes; nothing was posted",
                        fields.files.len(),
                        text::quote(&filename)
                    )));
                    continue;
                }
                fields.files.push(Attachment::Inline {
                    filename: if filename.trim().is_empty() {
                        "attachment".to_owned()
                    } else {
                        filename
                    },
                    media_type: media_type
                        .filter(|m| m.contains('/') && m.len() <= 255)
                        .unwrap_or_else(|| "application/octet-stream".to_owned()),
                    data_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
                });
            }
            None => {
                let value = String::from_utf8(bytes.to_vec())
                    .map_err(|_| not_form(format!("field {} is not UTF-8", text::quote(&name))))?;
                crate::service::storable(&format!("form.{name}"), &value)?;
                fields.text.entry(name).or_default().push(value);
            }
        }
    }
    Ok(refused)
}

/// `GET /console/messages/{id}/attachments/{n}`: attachment `n` (from 0) of a message the
/// signed-in person can read, as a download. Unknown and unreadable look the same.
pub(super) async fn attachment(
    State(c): State<Console>,
    Path((id, n)): Path<(String, usize)>,
    headers: HeaderMap,
) -> Response {
    let found = async {
        let s = session(&c, &headers).await?;
        let not_found = || ServiceError::not_found("attachment", format!("{id}/{n}"));
        let id = MessageId::parse(&id).map_err(|_| not_found())?;
        let slice = c
            .service
            .read_message(&s.caller, &id, None, Some(1))
            .await?;
        slice.attachments.into_iter().nth(n).ok_or_else(not_found)
    }
    .await;
    let (filename, bytes) = match found {
        Ok(Attachment::Inline {
            filename,
            data_base64,
            ..
        }) => (
            filename,
            base64::engine::general_purpose::STANDARD
                .decode(data_base64)
                .unwrap_or_default(),
        ),
        Ok(Attachment::Data { data }) => (
            "data.json".to_owned(),
            serde_json::to_vec_pretty(&data).unwrap_or_default(),
        ),
        Ok(Attachment::Url { .. }) => {
            return Page::from(ServiceError::invalid(
                "this attachment is a link: open it from the thread page",
            ))
            .with(&c, true)
            .into_response();
        }
        Err(e) => return Page::from(e).with(&c, true).into_response(),
    };
    let mut response = bytes.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_str(&disposition(&filename))
            .unwrap_or_else(|_| HeaderValue::from_static("attachment")),
    );
    response
}

/// `Content-Disposition` of a download named `filename`: the ASCII name, and the UTF-8 name with
/// every character that hides or reorders what is shown (bidi controls such as U+202E, which
/// make `exe.txt` of `txt.exe`, other invisible characters, line breaks, unusual spaces) replaced.
fn disposition(filename: &str) -> String {
    use crate::domain::text::{is_invisible, is_line_break, is_unusual_space};
    let shown: String = filename
        .chars()
        .map(|c| {
            if is_invisible(c) || is_line_break(c) || is_unusual_space(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    format!(
        "attachment; filename=\"{}\"; filename*=UTF-8''{}",
        ascii_name(filename),
        crate::domain::text::percent_encode(&shown)
    )
}

/// A filename reduced to what a quoted header value may hold.
fn ascii_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ' ') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.trim().is_empty() {
        "attachment".to_owned()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_names_cannot_break_the_header() {
        assert_eq!(ascii_name("a\"b\r\nc.html"), "a_b__c.html");
        assert_eq!(ascii_name("\u{202e}"), "_");
        assert_eq!(ascii_name(""), "attachment");
    }

    #[test]
    fn the_utf8_download_name_keeps_no_bidi_or_invisible_character() {
        let d = disposition("report\u{202e}fdp.exe");
        assert!(!d.contains("%E2%80%AE"), "{d}");
        assert!(d.ends_with("filename*=UTF-8''report_fdp.exe"), "{d}");
        for hidden in ['\u{200f}', '\u{2066}', '\u{200b}', '\u{2028}', '\u{a0}'] {
            let d = disposition(&format!("a{hidden}b.txt"));
            assert!(d.ends_with("UTF-8''a_b.txt"), "{hidden:?}: {d}");
        }
        // Other scripts stay as they are.
        assert!(disposition("résumé.pdf").ends_with("UTF-8''r%C3%A9sum%C3%A9.pdf"));
    }
}
