//! Service parameters and request checks shared by the three bindings: `A2A-Version`
//! negotiation, `A2A-Extensions`, and the JSON content types we accept.
//!
//! A missing or empty `A2A-Version` means 0.3 (spec §3.2.6), which this gateway does not serve:
//! every binding, gRPC included, refuses it with VersionNotSupported. A patch number in the value
//! is ignored (`1.0.2` is `1.0`).

use axum::http::HeaderMap;

use super::errors::{A2aError, ErrorKind};
use crate::domain::{MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, MAX_BODY_BYTES};

/// The largest request body an A2A binding reads: the largest valid message, which is a body of
/// `MAX_BODY_BYTES` (JSON-escaped, at worst 6 bytes per byte: `\u0001`) and `MAX_ATTACHMENTS`
/// attachments of `MAX_ATTACHMENT_BYTES` each, base64-encoded as JSON `raw` parts are, plus 64 KiB
/// for the envelope, ids and metadata. The same bound applies to gRPC, where bytes travel raw.
/// Anything larger is refused as PayloadTooLarge in the binding's own error shape.
pub const MAX_REQUEST_BYTES: usize =
    6 * MAX_BODY_BYTES + MAX_ATTACHMENTS * base64_len(MAX_ATTACHMENT_BYTES) + 64 * 1024;

const fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3) * 4
}

/// Most bytes of body read from a request whose credential did not authenticate: enough for the
/// JSON-RPC id and every error case, far less than a message with attachments. So a client without
/// a valid credential cannot make the server buffer [`MAX_REQUEST_BYTES`] per connection.
pub const UNAUTHENTICATED_BODY_BYTES: usize = 64 * 1024;

pub fn too_large() -> A2aError {
    A2aError::new(
        ErrorKind::PayloadTooLarge,
        format!(
            "the request is larger than {MAX_REQUEST_BYTES} bytes, the largest valid request (a \
             message carries at most {MAX_ATTACHMENTS} attachments of {MAX_ATTACHMENT_BYTES} \
             bytes and a body of {MAX_BODY_BYTES} bytes)"
        ),
    )
}

/// The one protocol version served (Major.Minor).
pub const SUPPORTED_VERSION: &str = "1.0";
/// Header (HTTP bindings), query parameter, and — lowercased — gRPC metadata key of the version.
pub const VERSION_HEADER: &str = "A2A-Version";
/// gRPC metadata key of the version.
pub const VERSION_METADATA: &str = "a2a-version";
/// Header of the extensions a client opts into (comma-separated URIs).
pub const EXTENSIONS_HEADER: &str = "A2A-Extensions";
/// What an absent version means.
const IMPLIED_VERSION: &str = "0.3";

/// Accepts the requested version if it is 1.0 (with or without a patch number).
pub fn check_version(requested: Option<&str>) -> Result<(), A2aError> {
    let requested = requested.map(str::trim).filter(|value| !value.is_empty());
    let supported = requested.is_some_and(|value| {
        let mut parts = value.split('.');
        let major_minor = (parts.next(), parts.next());
        let patch_ok = match parts.next() {
            None => true,
            Some(patch) => !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()),
        };
        major_minor == (Some("1"), Some("0")) && patch_ok && parts.next().is_none()
    });
    if supported {
        return Ok(());
    }
    let shown = requested.unwrap_or(IMPLIED_VERSION);
    Err(A2aError::new(
        ErrorKind::VersionNotSupported,
        format!(
            "A2A version '{shown}' is not supported; this agent speaks A2A {SUPPORTED_VERSION} \
             (send the header {VERSION_HEADER}: {SUPPORTED_VERSION})"
        ),
    )
    .with_metadata("requestedVersion", shown)
    .with_metadata("supportedVersions", SUPPORTED_VERSION))
}

/// [`check_version`] on gRPC metadata (`a2a-version`).
pub fn check_grpc_version(metadata: &tonic::metadata::MetadataMap) -> Result<(), A2aError> {
    check_version(
        metadata
            .get(VERSION_METADATA)
            .and_then(|value| value.to_str().ok()),
    )
}

/// The version an HTTP request asks for: the header, else the `A2A-Version` query parameter.
pub fn requested_version(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    if let Some(value) = headers.get(VERSION_HEADER) {
        return Some(value.to_str().unwrap_or_default().to_owned());
    }
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| name.eq_ignore_ascii_case(VERSION_HEADER))
        // `.` and digits are unreserved: a version needs no percent-decoding.
        .map(|(_, value)| value.to_owned())
}

/// The extension URIs a request opts into (every `A2A-Extensions` header, comma-separated).
pub fn requested_extensions(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(EXTENSIONS_HEADER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|uri| !uri.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Accepts `application/json` and `application/a2a+json` (any parameters, any case); anything
/// else, or none, is ContentTypeNotSupported.
pub fn check_json_content_type(content_type: Option<&str>) -> Result<(), A2aError> {
    let essence = content_type
        .and_then(|value| value.split(';').next())
        .map(|value| value.trim().to_ascii_lowercase());
    match essence.as_deref() {
        Some("application/json" | "application/a2a+json") => Ok(()),
        other => Err(A2aError::new(
            ErrorKind::ContentTypeNotSupported,
            format!(
                "Content type {} is not supported; send application/json or application/a2a+json",
                other.map_or_else(|| "(none)".to_owned(), |value| format!("'{value}'"))
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn version_1_0_is_accepted_with_or_without_patch() {
        for value in ["1.0", " 1.0 ", "1.0.0", "1.0.7"] {
            assert!(check_version(Some(value)).is_ok(), "{value}");
        }
    }

    #[test]
    fn missing_or_other_versions_are_refused() {
        for value in [
            None,
            Some(""),
            Some("0.3"),
            Some("1"),
            Some("1.1"),
            Some("2.0"),
            Some("99.0"),
            Some("1.0.x"),
            Some("1.0.0.0"),
            Some("1.0."),
        ] {
            let error = check_version(value).expect_err(&format!("{value:?}"));
            assert_eq!(error.kind, ErrorKind::VersionNotSupported);
        }
        let error = check_version(None).unwrap_err();
        assert!(error.message.contains("'0.3'"), "{}", error.message);
        assert_eq!(error.metadata["requestedVersion"], "0.3");
        assert_eq!(error.metadata["supportedVersions"], "1.0");
    }

    #[test]
    fn version_comes_from_the_header_then_the_query() {
        let mut headers = HeaderMap::new();
        assert_eq!(requested_version(&headers, None), None);
        assert_eq!(
            requested_version(&headers, Some("a=1&A2A-Version=1.0")),
            Some("1.0".into())
        );
        assert_eq!(
            requested_version(&headers, Some("a2a-version=1.0")),
            Some("1.0".into())
        );
        headers.insert("a2a-version", HeaderValue::from_static("2.0"));
        assert_eq!(
            requested_version(&headers, Some("A2A-Version=1.0")),
            Some("2.0".into())
        );
    }

    #[test]
    fn grpc_version_comes_from_metadata() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        assert!(check_grpc_version(&metadata).is_err());
        metadata.insert(VERSION_METADATA, "99.0".parse().unwrap());
        let error = check_grpc_version(&metadata).unwrap_err();
        assert_eq!(error.kind, ErrorKind::VersionNotSupported);
        metadata.insert(VERSION_METADATA, "1.0".parse().unwrap());
        assert!(check_grpc_version(&metadata).is_ok());
    }

    #[test]
    fn extensions_are_split_on_commas_across_headers() {
        let mut headers = HeaderMap::new();
        headers.append("a2a-extensions", HeaderValue::from_static("urn:a, urn:b"));
        headers.append("A2A-Extensions", HeaderValue::from_static("urn:c,"));
        assert_eq!(requested_extensions(&headers), ["urn:a", "urn:b", "urn:c"]);
    }

    #[test]
    fn json_content_types_are_accepted_and_others_refused() {
        for value in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/a2a+json",
        ] {
            assert!(check_json_content_type(Some(value)).is_ok(), "{value}");
        }
        for value in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some(""),
        ] {
            let error = check_json_content_type(value).expect_err(&format!("{value:?}"));
            assert_eq!(error.kind, ErrorKind::ContentTypeNotSupported);
        }
    }
}
