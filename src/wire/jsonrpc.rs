//! The JSON-RPC 2.0 envelope of the A2A JSON-RPC binding: parsing a request into one of the
//! eleven methods with its raw params, decoding params into a wire type, and rendering results
//! and errors. No dispatch here: the binding decodes, calls the service, encodes.
//!
//! Choices: a batch (JSON array) is refused with InvalidRequest; a request without `id` is
//! answered (with InvalidRequest) rather than treated as a silent notification, since every A2A
//! method has a result; absent or `null` params read as `{}`; the 0.3 method names are unknown
//! methods, with a hint.
//!
//! The envelope is read into its four members with the params kept as the client wrote them
//! ([`RawValue`]), which are then read once, straight into the method's wire type (a
//! `serde_json::Value` tree of the whole request first, then the wire type read from it, cost
//! 1.9% more of an intake's instructions). Members other than the four are ignored; a member
//! given twice is an InvalidRequest.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::errors::{A2aError, ErrorKind};

/// The eleven A2A methods; the JSON-RPC name is the RPC name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
}

impl Method {
    pub const ALL: [Method; 11] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::ListTasks,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::CreateTaskPushNotificationConfig,
        Method::GetTaskPushNotificationConfig,
        Method::ListTaskPushNotificationConfigs,
        Method::DeleteTaskPushNotificationConfig,
        Method::GetExtendedAgentCard,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::SendMessage => "SendMessage",
            Method::SendStreamingMessage => "SendStreamingMessage",
            Method::GetTask => "GetTask",
            Method::ListTasks => "ListTasks",
            Method::CancelTask => "CancelTask",
            Method::SubscribeToTask => "SubscribeToTask",
            Method::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Method::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Method::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Method::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Method::GetExtendedAgentCard => "GetExtendedAgentCard",
        }
    }

    /// Exact, case-sensitive lookup.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|method| method.name() == name)
    }

    /// Whether the answer is an SSE stream of `StreamResponse`s rather than one response.
    pub fn is_streaming(self) -> bool {
        matches!(self, Method::SendStreamingMessage | Method::SubscribeToTask)
    }
}

/// A well-formed request for a known method.
#[derive(Debug, Clone)]
pub struct Request {
    /// Echoed in the response: a string or a number.
    pub id: Value,
    pub method: Method,
    /// The params object as written (`{}` when absent or `null`), to decode with
    /// [`decode_params`].
    pub params: Box<RawValue>,
}

/// The members of a request object the binding reads.
#[derive(Deserialize)]
struct Envelope {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Box<RawValue>>,
}

/// A request that cannot be served, with the id to answer it under (`null` when unknown).
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: Value,
    pub error: A2aError,
}

/// Parses a request body.
pub fn parse_request(body: &[u8]) -> Result<Request, Rejected> {
    let invalid = |id: Value, message: &str| Rejected {
        id,
        error: A2aError::new(ErrorKind::InvalidRequest, message),
    };
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        // JSON, but not one request object: a batch, a scalar, or a member given twice.
        Err(error) if error.is_data() => {
            let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            let message = if object {
                format!("The request object is not valid: {error}")
            } else {
                "A JSON-RPC request must be a JSON object (batches are not supported)".to_owned()
            };
            return Err(invalid(Value::Null, &message));
        }
        Err(error) => {
            return Err(Rejected {
                id: Value::Null,
                error: A2aError::new(
                    ErrorKind::ParseError,
                    format!("The body is not valid JSON: {error}"),
                ),
            });
        }
    };
    // An absent and a `null` member read alike (`None`).
    let id = match envelope.id {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        None => {
            return Err(invalid(
                Value::Null,
                "The request needs an id (a string or a number)",
            ));
        }
        Some(_) => {
            return Err(invalid(Value::Null, "The id must be a string or a number"));
        }
    };
    if envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id, "The member jsonrpc must be \"2.0\""));
    }
    let Some(Value::String(name)) = envelope.method else {
        return Err(invalid(id, "The member method must be a string"));
    };
    let Some(method) = Method::from_name(&name) else {
        let hint = if name.contains('/') {
            " (A2A 0.3 method names are not served; A2A 1.0 names are PascalCase, e.g. SendMessage)"
        } else {
            ""
        };
        return Err(Rejected {
            id,
            error: A2aError::new(
                ErrorKind::MethodNotFound,
                format!("Method not found: {name:?}{hint}"),
            )
            .with_metadata("method", name),
        });
    };
    let params = match envelope.params {
        None => RawValue::from_string("{}".to_owned()).expect("{} is JSON"),
        Some(params) if params.get().starts_with('{') => params,
        Some(_) => {
            return Err(Rejected {
                id,
                error: A2aError::new(ErrorKind::InvalidParams, "The params must be an object"),
            });
        }
    };
    Ok(Request { id, method, params })
}

/// Decodes params into a wire type; a mismatch is InvalidParams with serde's reason.
pub fn decode_params<T: DeserializeOwned>(params: &RawValue) -> Result<T, A2aError> {
    serde_json::from_str(params.get()).map_err(|error| {
        A2aError::new(ErrorKind::InvalidParams, format!("Invalid params: {error}"))
    })
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// [`success`] with the result already JSON text (from [`super::protojson::render_text`]).
pub fn success_text(id: &Value, result: &str) -> String {
    let id = id.to_string();
    let mut text = String::with_capacity(result.len() + id.len() + 32);
    text.push_str(r#"{"jsonrpc":"2.0","id":"#);
    text.push_str(&id);
    text.push_str(r#","result":"#);
    text.push_str(result);
    text.push('}');
    text
}

/// `{"jsonrpc":"2.0","id":…,"error":{code, message, data:[ErrorInfo]}}`.
pub fn failure(id: &Value, error: &A2aError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.jsonrpc_error()})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(body: &str) -> Rejected {
        parse_request(body.as_bytes()).expect_err(body)
    }

    fn raw(value: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    #[test]
    fn every_method_parses_by_its_rpc_name() {
        for method in Method::ALL {
            let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#, method.name());
            let request = parse_request(body.as_bytes()).unwrap();
            assert_eq!(request.method, method);
            assert_eq!(request.params.get(), "{}");
        }
        let streaming: Vec<_> = Method::ALL
            .into_iter()
            .filter(|m| m.is_streaming())
            .collect();
        assert_eq!(
            streaming,
            [Method::SendStreamingMessage, Method::SubscribeToTask]
        );
    }

    #[test]
    fn null_params_and_other_members_read_as_no_params() {
        let request = parse_request(
            br#" {"jsonrpc":"2.0","id":1.5,"method":"GetTask","params":null,"extra":[{}]} "#,
        )
        .unwrap();
        assert_eq!(request.id, json!(1.5));
        assert_eq!(request.params.get(), "{}");
    }

    #[test]
    fn id_and_params_are_kept() {
        let request = parse_request(
            br#"{"jsonrpc":"2.0","id":"abc","method":"GetTask","params":{"id":"t1","historyLength":2}}"#,
        )
        .unwrap();
        assert_eq!(request.id, json!("abc"));
        assert_eq!(request.params.get(), r#"{"id":"t1","historyLength":2}"#);
    }

    #[test]
    fn bad_envelopes_get_the_standard_codes() {
        let cases = [
            ("not json", ErrorKind::ParseError, Value::Null),
            ("[]", ErrorKind::InvalidRequest, Value::Null),
            (
                r#"{"jsonrpc":"2.0","method":"GetTask"}"#,
                ErrorKind::InvalidRequest,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#,
                ErrorKind::InvalidRequest,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"1.0","id":7,"method":"GetTask"}"#,
                ErrorKind::InvalidRequest,
                json!(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":3}"#,
                ErrorKind::InvalidRequest,
                json!(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get"}"#,
                ErrorKind::MethodNotFound,
                json!(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"gettask"}"#,
                ErrorKind::MethodNotFound,
                json!(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":[1]}"#,
                ErrorKind::InvalidParams,
                json!(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":"{}"}"#,
                ErrorKind::InvalidParams,
                json!(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"id":8,"method":"GetTask"}"#,
                ErrorKind::InvalidRequest,
                Value::Null,
            ),
            (
                r#" {"jsonrpc":"2.0","id":7,"method":"GetTask"} x"#,
                ErrorKind::ParseError,
                Value::Null,
            ),
            (r#""GetTask""#, ErrorKind::InvalidRequest, Value::Null),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"GetTask"}"#,
                ErrorKind::InvalidRequest,
                Value::Null,
            ),
        ];
        for (body, kind, id) in cases {
            let rejection = rejected(body);
            assert_eq!(rejection.error.kind, kind, "{body}");
            assert_eq!(rejection.id, id, "{body}");
        }
        assert!(
            rejected(r#"{"jsonrpc":"2.0","id":7,"method":"message/send"}"#)
                .error
                .message
                .contains("0.3")
        );
    }

    #[test]
    fn params_decode_into_wire_types_or_fail_as_invalid_params() {
        let request: super::super::pb::GetTaskRequest = decode_params(&raw(
            json!({"id": "t1", "historyLength": 3, "unknownField": true}),
        ))
        .unwrap();
        assert_eq!(request.id, "t1");
        assert_eq!(request.history_length, Some(3));
        let error =
            decode_params::<super::super::pb::GetTaskRequest>(&raw(json!({"historyLength": "x"})))
                .unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidParams);
    }

    #[test]
    fn enums_read_as_names_or_numbers() {
        let by_name: super::super::pb::ListTasksRequest =
            decode_params(&raw(json!({"status": "TASK_STATE_WORKING"}))).unwrap();
        let by_number: super::super::pb::ListTasksRequest =
            decode_params(&raw(json!({"status": 2}))).unwrap();
        assert_eq!(by_name.status, super::super::pb::TaskState::Working as i32);
        assert_eq!(by_number.status, by_name.status);
    }

    #[test]
    fn wire_types_render_as_protojson() {
        use super::super::pb;
        let task = pb::Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: Some(pb::TaskStatus {
                state: pb::TaskState::Completed as i32,
                message: None,
                timestamp: Some(crate::wire::wkt::Timestamp {
                    seconds: 1_780_000_000,
                    nanos: 123_000_000,
                }),
            }),
            artifacts: vec![pb::Artifact {
                artifact_id: "a1".into(),
                parts: vec![
                    pb::Part {
                        content: Some(pb::part::Content::Raw(b"tck".to_vec())),
                        filename: "output.txt".into(),
                        media_type: "text/plain".into(),
                        ..Default::default()
                    },
                    pb::Part {
                        content: Some(pb::part::Content::Data(pbjson_types::Value {
                            kind: Some(pbjson_types::value::Kind::NumberValue(42.0)),
                        })),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            history: Vec::new(),
            metadata: None,
        };
        let json = serde_json::to_value(&task).unwrap();
        assert_eq!(
            json,
            json!({
                "id": "t1",
                "contextId": "c1",
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-05-28T20:26:40.123Z"},
                "artifacts": [{
                    "artifactId": "a1",
                    "parts": [
                        {"raw": "dGNr", "filename": "output.txt", "mediaType": "text/plain"},
                        {"data": 42.0}
                    ]
                }]
            })
        );
        let back: pb::Task = serde_json::from_value(json).unwrap();
        assert_eq!(back, task);
    }

    #[test]
    fn responses_are_rendered_with_their_id() {
        assert_eq!(
            success(&json!(1), json!({"task": {}})),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {}}})
        );
        let error = A2aError::of(ErrorKind::TaskNotFound);
        let rendered = failure(&json!("x"), &error);
        assert_eq!(rendered["id"], "x");
        assert_eq!(rendered["error"]["code"], -32001);
        assert_eq!(rendered["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
    }

    #[test]
    fn an_answer_written_as_text_is_the_answer_built_as_a_tree() {
        use crate::wire::{pb, protojson};
        let task = pb::Task {
            id: "t\"1\u{2028}".into(),
            context_id: "c".into(),
            status: Some(pb::TaskStatus {
                state: pb::TaskState::Submitted as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        let response = pb::SendMessageResponse {
            payload: Some(pb::send_message_response::Payload::Task(task)),
        };
        let empty_page = pb::ListTasksResponse::default();
        for id in [json!(7), json!("a\"b\\c\u{7}"), Value::Null] {
            let text = success_text(&id, &protojson::render_text(&response));
            let parsed: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed, success(&id, protojson::render(&response)), "{text}");
            // A type with REQUIRED fields to add back keeps them.
            let text = success_text(&id, &protojson::render_text(&empty_page));
            let parsed: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                parsed,
                success(&id, protojson::render(&empty_page)),
                "{text}"
            );
            assert_eq!(parsed["result"]["nextPageToken"], "");
        }
    }
}
