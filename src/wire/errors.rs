//! The one table of A2A errors: for each error, its JSON-RPC code, HTTP status, gRPC code and
//! `google.rpc.ErrorInfo` reason, per spec version, and its rendering on each binding.
//!
//! Spec v1.0.1 changed several HTTP and gRPC statuses of v1.0.0 (A2A PR #1627); v1.0.1 is the
//! default, v1.0.0 (what the conformance kit `1.0-dev` checks) is a switch. JSON-RPC codes and
//! reasons are the same in both. Pure data plus rendering: no service, no store.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use tonic::Code;

/// `ErrorInfo.domain` of every A2A error.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// `@type` of a `google.rpc.ErrorInfo` in ProtoJSON `Any` form.
const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// Which edition of the spec's error-to-status mapping to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum SpecVersion {
    /// A2A v1.0.0: 409, 415, 502 and `UNIMPLEMENTED` where v1.0.1 says 400, 500 and
    /// `FAILED_PRECONDITION`.
    #[serde(rename = "1.0.0")]
    V1_0_0,
    /// A2A v1.0.1, the current mapping.
    #[default]
    #[serde(rename = "1.0.1")]
    V1_0_1,
}

/// Every error an A2A binding can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// JSON-RPC `-32700`: the body is not JSON.
    ParseError,
    /// JSON-RPC `-32600`: JSON, but not a valid request object.
    InvalidRequest,
    /// JSON-RPC `-32601`: no such method (also the 0.3 method names).
    MethodNotFound,
    /// JSON-RPC `-32602`: parameters fail validation.
    InvalidParams,
    /// JSON-RPC `-32603`: our fault; the body stays opaque.
    InternalError,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
    /// Not in the spec's table (liaison's own row, in the spec's reserved server-error range): the
    /// caller's request rate, or its open streams, exceeded a limit. HTTP 429 with `Retry-After`,
    /// gRPC `RESOURCE_EXHAUSTED` with `RetryInfo`, when `retryAfterSeconds` is in the metadata.
    ResourceExhausted,
    /// No credential, or one the server does not accept (spec §3.3.2 "Authentication Errors":
    /// HTTP 401, gRPC `UNAUTHENTICATED`, a custom JSON-RPC code).
    Unauthenticated,
    /// Authenticated, but not allowed to do this (§3.3.2 "Authorization Errors": HTTP 403, gRPC
    /// `PERMISSION_DENIED`, a custom JSON-RPC code). Never for a resource the caller cannot see:
    /// that is TaskNotFound.
    PermissionDenied,
    /// The request body is larger than the largest valid request (HTTP 413, gRPC
    /// `RESOURCE_EXHAUSTED` as gRPC itself answers an oversize message, JSON-RPC InvalidRequest).
    PayloadTooLarge,
    /// Not in the spec's table (liaison's own row, like the two above): the server cannot serve
    /// the request now but may shortly (its database restarts, its disk is full). The retryable
    /// code of each binding: HTTP 503 and gRPC `UNAVAILABLE`, both with the wait when the
    /// metadata has one; JSON-RPC `-31503`, outside the reserved range like `-31401`/`-31403`,
    /// named for its HTTP status.
    Unavailable,
}

/// `ErrorInfo.metadata` key of the seconds to wait before retrying (`ResourceExhausted`).
pub const RETRY_AFTER_KEY: &str = "retryAfterSeconds";

/// How one error appears on the wire, for one spec version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireMapping {
    pub jsonrpc_code: i32,
    pub http_status: StatusCode,
    pub grpc_code: Code,
    /// `ErrorInfo.reason`: the error's name in UPPER_SNAKE_CASE without the `Error` suffix.
    pub reason: &'static str,
}

struct Row {
    kind: ErrorKind,
    jsonrpc_code: i32,
    reason: &'static str,
    message: &'static str,
    /// (HTTP status, gRPC code) in v1.0.1.
    current: (u16, Code),
    /// (HTTP status, gRPC code) in v1.0.0.
    v1_0_0: (u16, Code),
}

/// The table. One row per [`ErrorKind`], in declaration order.
#[rustfmt::skip]
const TABLE: [Row; 19] = [
    row(ErrorKind::ParseError, -32700, "JSON_PARSE", "Invalid JSON payload", (400, Code::InvalidArgument), (400, Code::InvalidArgument)),
    row(ErrorKind::InvalidRequest, -32600, "INVALID_REQUEST", "Request payload validation error", (400, Code::InvalidArgument), (400, Code::InvalidArgument)),
    row(ErrorKind::MethodNotFound, -32601, "METHOD_NOT_FOUND", "Method not found", (404, Code::Unimplemented), (404, Code::Unimplemented)),
    row(ErrorKind::InvalidParams, -32602, "INVALID_PARAMS", "Invalid parameters", (400, Code::InvalidArgument), (400, Code::InvalidArgument)),
    row(ErrorKind::InternalError, -32603, "INTERNAL", "Internal error", (500, Code::Internal), (500, Code::Internal)),
    row(ErrorKind::TaskNotFound, -32001, "TASK_NOT_FOUND", "Task not found", (404, Code::NotFound), (404, Code::NotFound)),
    row(ErrorKind::TaskNotCancelable, -32002, "TASK_NOT_CANCELABLE", "Task cannot be canceled", (400, Code::FailedPrecondition), (409, Code::FailedPrecondition)),
    row(ErrorKind::PushNotificationNotSupported, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", "Push notifications are not supported", (400, Code::FailedPrecondition), (400, Code::Unimplemented)),
    row(ErrorKind::UnsupportedOperation, -32004, "UNSUPPORTED_OPERATION", "This operation is not supported", (400, Code::FailedPrecondition), (400, Code::Unimplemented)),
    row(ErrorKind::ContentTypeNotSupported, -32005, "CONTENT_TYPE_NOT_SUPPORTED", "Incompatible content types", (400, Code::InvalidArgument), (415, Code::InvalidArgument)),
    row(ErrorKind::InvalidAgentResponse, -32006, "INVALID_AGENT_RESPONSE", "Invalid agent response", (500, Code::Internal), (502, Code::Internal)),
    row(ErrorKind::ExtendedAgentCardNotConfigured, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "Extended agent card is not configured", (400, Code::FailedPrecondition), (400, Code::FailedPrecondition)),
    row(ErrorKind::ExtensionSupportRequired, -32008, "EXTENSION_SUPPORT_REQUIRED", "A required extension is not supported by the client", (400, Code::FailedPrecondition), (400, Code::FailedPrecondition)),
    row(ErrorKind::VersionNotSupported, -32009, "VERSION_NOT_SUPPORTED", "A2A version not supported", (400, Code::FailedPrecondition), (400, Code::Unimplemented)),
    row(ErrorKind::ResourceExhausted, -32000, "RESOURCE_EXHAUSTED", "Too many requests", (429, Code::ResourceExhausted), (429, Code::ResourceExhausted)),
    // Not A2A errors: the spec names only their HTTP and gRPC codes. JSON-RPC codes outside the
    // range JSON-RPC reserves (-32768..-32000), so no future A2A code can collide.
    row(ErrorKind::Unauthenticated, -31401, "UNAUTHENTICATED", "Authentication required", (401, Code::Unauthenticated), (401, Code::Unauthenticated)),
    row(ErrorKind::PermissionDenied, -31403, "PERMISSION_DENIED", "Permission denied", (403, Code::PermissionDenied), (403, Code::PermissionDenied)),
    row(ErrorKind::PayloadTooLarge, -32600, "PAYLOAD_TOO_LARGE", "Request too large", (413, Code::ResourceExhausted), (413, Code::ResourceExhausted)),
    row(ErrorKind::Unavailable, -31503, "UNAVAILABLE", "Service unavailable; retry later", (503, Code::Unavailable), (503, Code::Unavailable)),
];

const fn row(
    kind: ErrorKind,
    jsonrpc_code: i32,
    reason: &'static str,
    message: &'static str,
    current: (u16, Code),
    v1_0_0: (u16, Code),
) -> Row {
    Row {
        kind,
        jsonrpc_code,
        reason,
        message,
        current,
        v1_0_0,
    }
}

impl ErrorKind {
    /// Every kind, in table order.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::ParseError,
        ErrorKind::InvalidRequest,
        ErrorKind::MethodNotFound,
        ErrorKind::InvalidParams,
        ErrorKind::InternalError,
        ErrorKind::TaskNotFound,
        ErrorKind::TaskNotCancelable,
        ErrorKind::PushNotificationNotSupported,
        ErrorKind::UnsupportedOperation,
        ErrorKind::ContentTypeNotSupported,
        ErrorKind::InvalidAgentResponse,
        ErrorKind::ExtendedAgentCardNotConfigured,
        ErrorKind::ExtensionSupportRequired,
        ErrorKind::VersionNotSupported,
        ErrorKind::ResourceExhausted,
        ErrorKind::Unauthenticated,
        ErrorKind::PermissionDenied,
        ErrorKind::PayloadTooLarge,
        ErrorKind::Unavailable,
    ];

    fn row(self) -> &'static Row {
        // The table is in declaration order; the test `table_rows_follow_declaration_order`
        // holds it there.
        let row = &TABLE[self as usize];
        debug_assert_eq!(row.kind, self);
        row
    }

    /// The codes and reason of this error under `version`.
    pub fn wire(self, version: SpecVersion) -> WireMapping {
        let row = self.row();
        let (http, grpc_code) = match version {
            SpecVersion::V1_0_1 => row.current,
            SpecVersion::V1_0_0 => row.v1_0_0,
        };
        WireMapping {
            jsonrpc_code: row.jsonrpc_code,
            http_status: StatusCode::from_u16(http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            grpc_code,
            reason: row.reason,
        }
    }

    /// The spec's standard message for this error.
    pub fn default_message(self) -> &'static str {
        self.row().message
    }
}

/// An A2A error ready to be rendered on any binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2aError {
    pub kind: ErrorKind,
    /// Human-readable; for `InternalError` keep it opaque (the cause is logged, not sent).
    pub message: String,
    /// `ErrorInfo.metadata`, e.g. `taskId`.
    pub metadata: BTreeMap<String, String>,
}

impl A2aError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        A2aError {
            kind,
            message: message.into(),
            metadata: BTreeMap::new(),
        }
    }

    /// The error with the spec's standard message.
    pub fn of(kind: ErrorKind) -> Self {
        A2aError::new(kind, kind.default_message())
    }

    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Seconds to wait before retrying, when the error says (see [`RETRY_AFTER_KEY`]).
    pub fn retry_after_s(&self) -> Option<u64> {
        self.metadata.get(RETRY_AFTER_KEY)?.parse().ok()
    }

    /// The `google.rpc.ErrorInfo` in ProtoJSON `Any` form.
    fn error_info_json(&self) -> Value {
        json!({
            "@type": ERROR_INFO_TYPE,
            "reason": self.kind.row().reason,
            "domain": ERROR_DOMAIN,
            "metadata": self.metadata,
        })
    }

    /// The JSON-RPC `error` member: `{code, message, data: [ErrorInfo]}`. The HTTP status of a
    /// JSON-RPC error response is 200, as a2a-sdk does.
    pub fn jsonrpc_error(&self) -> Value {
        json!({
            "code": self.kind.row().jsonrpc_code,
            "message": self.message,
            "data": [self.error_info_json()],
        })
    }

    /// The HTTP+JSON (AIP-193) status and body: `{"error": {code, status, message, details}}`.
    /// `status` names the same `google.rpc.Code` the gRPC binding sends for this error, so one
    /// error is one `google.rpc.Status` everywhere; `code` is the table's HTTP status.
    pub fn rest_error(&self, version: SpecVersion) -> (StatusCode, Value) {
        let wire = self.kind.wire(version);
        let body = json!({
            "error": {
                "code": wire.http_status.as_u16(),
                "status": grpc_code_name(wire.grpc_code),
                "message": self.message,
                "details": [self.error_info_json()],
            }
        });
        (wire.http_status, body)
    }

    /// The gRPC status, with `ErrorInfo` in `grpc-status-details-bin`.
    pub fn grpc_status(&self, version: SpecVersion) -> tonic::Status {
        use tonic_types::{ErrorDetails, StatusExt as _};
        let wire = self.kind.wire(version);
        let metadata: std::collections::HashMap<String, String> = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut details = ErrorDetails::with_error_info(wire.reason, ERROR_DOMAIN, metadata);
        if let Some(s) = self.retry_after_s() {
            details.set_retry_info(Some(std::time::Duration::from_secs(s)));
        }
        tonic::Status::with_error_details(wire.grpc_code, self.message.clone(), details)
    }
}

impl std::fmt::Display for A2aError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.row().reason, self.message)
    }
}

impl std::error::Error for A2aError {}

/// The enum name of a `google.rpc.Code`, as AIP-193's `status` member spells it.
fn grpc_code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected mapping, written out independently of `TABLE`: kind, JSON-RPC code, reason,
    /// (HTTP, gRPC) in v1.0.1, (HTTP, gRPC) in v1.0.0.
    #[allow(clippy::type_complexity)]
    #[rustfmt::skip]
    const EXPECTED: [(ErrorKind, i32, &str, (u16, Code), (u16, Code)); 19] = [
        (ErrorKind::ParseError, -32700, "JSON_PARSE", (400, Code::InvalidArgument), (400, Code::InvalidArgument)),
        (ErrorKind::InvalidRequest, -32600, "INVALID_REQUEST", (400, Code::InvalidArgument), (400, Code::InvalidArgument)),
        (ErrorKind::MethodNotFound, -32601, "METHOD_NOT_FOUND", (404, Code::Unimplemented), (404, Code::Unimplemented)),
        (ErrorKind::InvalidParams, -32602, "INVALID_PARAMS", (400, Code::InvalidArgument), (400, Code::InvalidArgument)),
        (ErrorKind::InternalError, -32603, "INTERNAL", (500, Code::Internal), (500, Code::Internal)),
        (ErrorKind::TaskNotFound, -32001, "TASK_NOT_FOUND", (404, Code::NotFound), (404, Code::NotFound)),
        (ErrorKind::TaskNotCancelable, -32002, "TASK_NOT_CANCELABLE", (400, Code::FailedPrecondition), (409, Code::FailedPrecondition)),
        (ErrorKind::PushNotificationNotSupported, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", (400, Code::FailedPrecondition), (400, Code::Unimplemented)),
        (ErrorKind::UnsupportedOperation, -32004, "UNSUPPORTED_OPERATION", (400, Code::FailedPrecondition), (400, Code::Unimplemented)),
        (ErrorKind::ContentTypeNotSupported, -32005, "CONTENT_TYPE_NOT_SUPPORTED", (400, Code::InvalidArgument), (415, Code::InvalidArgument)),
        (ErrorKind::InvalidAgentResponse, -32006, "INVALID_AGENT_RESPONSE", (500, Code::Internal), (502, Code::Internal)),
        (ErrorKind::ExtendedAgentCardNotConfigured, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", (400, Code::FailedPrecondition), (400, Code::FailedPrecondition)),
        (ErrorKind::ExtensionSupportRequired, -32008, "EXTENSION_SUPPORT_REQUIRED", (400, Code::FailedPrecondition), (400, Code::FailedPrecondition)),
        (ErrorKind::VersionNotSupported, -32009, "VERSION_NOT_SUPPORTED", (400, Code::FailedPrecondition), (400, Code::Unimplemented)),
        (ErrorKind::ResourceExhausted, -32000, "RESOURCE_EXHAUSTED", (429, Code::ResourceExhausted), (429, Code::ResourceExhausted)),
        (ErrorKind::Unauthenticated, -31401, "UNAUTHENTICATED", (401, Code::Unauthenticated), (401, Code::Unauthenticated)),
        (ErrorKind::PermissionDenied, -31403, "PERMISSION_DENIED", (403, Code::PermissionDenied), (403, Code::PermissionDenied)),
        (ErrorKind::PayloadTooLarge, -32600, "PAYLOAD_TOO_LARGE", (413, Code::ResourceExhausted), (413, Code::ResourceExhausted)),
        (ErrorKind::Unavailable, -31503, "UNAVAILABLE", (503, Code::Unavailable), (503, Code::Unavailable)),
    ];

    #[test]
    fn every_error_maps_as_the_spec_says_in_both_versions() {
        for (kind, jsonrpc, reason, current, old) in EXPECTED {
            for (version, (http, grpc)) in
                [(SpecVersion::V1_0_1, current), (SpecVersion::V1_0_0, old)]
            {
                let wire = kind.wire(version);
                assert_eq!(wire.jsonrpc_code, jsonrpc, "{kind:?} {version:?}");
                assert_eq!(wire.http_status.as_u16(), http, "{kind:?} {version:?}");
                assert_eq!(wire.grpc_code, grpc, "{kind:?} {version:?}");
                assert_eq!(wire.reason, reason, "{kind:?} {version:?}");
            }
        }
    }

    #[test]
    fn table_rows_follow_declaration_order() {
        assert_eq!(ErrorKind::ALL.len(), TABLE.len());
        for (index, kind) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(TABLE[index].kind, *kind);
            assert_eq!(*kind as usize, index);
        }
        assert_eq!(EXPECTED.map(|row| row.0), ErrorKind::ALL);
    }

    #[test]
    fn default_version_is_1_0_1() {
        assert_eq!(SpecVersion::default(), SpecVersion::V1_0_1);
        let parsed: SpecVersion = serde_json::from_str("\"1.0.0\"").unwrap();
        assert_eq!(parsed, SpecVersion::V1_0_0);
    }

    #[test]
    fn every_binding_carries_error_info() {
        for kind in ErrorKind::ALL {
            for version in [SpecVersion::V1_0_0, SpecVersion::V1_0_1] {
                let error = A2aError::of(kind).with_metadata("taskId", "t-1");
                let wire = kind.wire(version);
                let expected_info = json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": wire.reason,
                    "domain": "a2a-protocol.org",
                    "metadata": {"taskId": "t-1"},
                });

                let jsonrpc = error.jsonrpc_error();
                assert_eq!(jsonrpc["code"], wire.jsonrpc_code);
                assert_eq!(jsonrpc["message"], kind.default_message());
                assert_eq!(jsonrpc["data"], json!([expected_info.clone()]));

                let (status, body) = error.rest_error(version);
                assert_eq!(status, wire.http_status);
                assert_eq!(body["error"]["code"], wire.http_status.as_u16());
                assert_eq!(body["error"]["details"], json!([expected_info]));

                let grpc = error.grpc_status(version);
                assert_eq!(grpc.code(), wire.grpc_code);
                use tonic_types::StatusExt as _;
                let info = grpc
                    .get_details_error_info()
                    .expect("ErrorInfo in the status details");
                assert_eq!(info.reason, wire.reason);
                assert_eq!(info.domain, ERROR_DOMAIN);
                assert_eq!(info.metadata.get("taskId").map(String::as_str), Some("t-1"));
            }
        }
    }

    #[test]
    fn rest_status_names_the_grpc_code() {
        let (status, body) = A2aError::of(ErrorKind::TaskNotFound).rest_error(SpecVersion::V1_0_1);
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"]["status"], "NOT_FOUND");
        let (status, body) =
            A2aError::of(ErrorKind::TaskNotCancelable).rest_error(SpecVersion::V1_0_0);
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body["error"]["status"], "FAILED_PRECONDITION");
        let (_, body) =
            A2aError::of(ErrorKind::VersionNotSupported).rest_error(SpecVersion::V1_0_1);
        assert_eq!(body["error"]["status"], "FAILED_PRECONDITION");
    }
}
