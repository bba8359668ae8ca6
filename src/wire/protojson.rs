//! ProtoJSON rendering of the wire types for the two JSON bindings.
//!
//! pbjson omits every field at its default value, which is ProtoJSON's rule, but A2A marks some
//! response fields REQUIRED and clients check for them: `ListTasksResponse.nextPageToken` is `""`
//! on the last page and must still be there, and `tasks`, `pageSize` and `totalSize` are present
//! even when zero (conformance kit CORE-LIST-004). [`render`] adds those back; everything else
//! (e.g. `artifacts` absent when not asked for) stays as pbjson writes it.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::pb;

/// A wire message whose REQUIRED fields must appear even at their default value.
pub trait Required: Serialize {
    /// `(JSON name, default value)` of each such field.
    fn required_defaults() -> Vec<(&'static str, Value)> {
        Vec::new()
    }
}

impl Required for pb::ListTasksResponse {
    fn required_defaults() -> Vec<(&'static str, Value)> {
        vec![
            ("tasks", json!([])),
            ("nextPageToken", json!("")),
            ("pageSize", json!(0)),
            ("totalSize", json!(0)),
        ]
    }
}

impl Required for pb::Task {}
impl Required for pb::SendMessageResponse {}
impl Required for pb::StreamResponse {}
impl Required for pb::TaskPushNotificationConfig {}
impl Required for pb::ListTaskPushNotificationConfigsResponse {}
impl Required for pb::AgentCard {}

/// The ProtoJSON text of `message`, REQUIRED fields included: written straight from the message
/// when it has none to add back (no JSON tree is built for a task, the hot path), else as
/// [`render`] writes it.
pub fn render_text<T: Required>(message: &T) -> String {
    if T::required_defaults().is_empty() {
        serde_json::to_string(message).unwrap_or_else(|_| "{}".to_owned())
    } else {
        render(message).to_string()
    }
}

/// The ProtoJSON of `message`, REQUIRED fields included.
pub fn render<T: Required>(message: &T) -> Value {
    let mut value = serde_json::to_value(message).unwrap_or_else(|_| Value::Object(Map::new()));
    if let Value::Object(members) = &mut value {
        for (name, default) in T::required_defaults() {
            members.entry(name).or_insert(default);
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_page_of_list_tasks_keeps_its_required_fields() {
        let empty = pb::ListTasksResponse::default();
        assert_eq!(
            render(&empty),
            json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0})
        );
        let page = pb::ListTasksResponse {
            tasks: vec![pb::Task {
                id: "t1".into(),
                status: Some(pb::TaskStatus {
                    state: pb::TaskState::Working as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            next_page_token: "n".into(),
            page_size: 1,
            total_size: 2,
        };
        let value = render(&page);
        assert_eq!(value["nextPageToken"], "n");
        assert_eq!(value["totalSize"], 2);
        assert!(
            value["tasks"][0].get("artifacts").is_none(),
            "artifacts are absent, not [], when there are none"
        );
    }

    #[test]
    fn other_messages_render_as_pbjson_does() {
        let config = pb::TaskPushNotificationConfig {
            url: "https://client.example/hook".into(),
            ..Default::default()
        };
        assert_eq!(
            render(&config),
            json!({"url": "https://client.example/hook"})
        );
    }
}
