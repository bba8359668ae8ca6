//! HTTP+JSON query strings into request messages: the GET routes carry their request fields as
//! query parameters (camelCase or proto names, enums by name, booleans `true`/`false`, numbers in
//! decimal, timestamps in RFC 3339) and path variables (`id`, `taskId`, `tenant`).
//!
//! The parameters become a JSON object that the pbjson deserialisers read, so a query parameter
//! follows exactly the rules of the same field in a JSON body; unknown parameters are ignored.

use axum::extract::Query;
use axum::http::Uri;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::errors::{A2aError, ErrorKind};

/// Fields read as booleans rather than strings.
const BOOLEAN_FIELDS: [&str; 2] = ["includeArtifacts", "include_artifacts"];
/// Fields read as numbers rather than strings.
const NUMBER_FIELDS: [&str; 4] = ["pageSize", "page_size", "historyLength", "history_length"];
/// Enum fields: a name stays a string, a decimal value becomes a number.
const ENUM_FIELDS: [&str; 1] = ["status"];

/// The request `T` of a GET route: `path` holds the path variables (JSON names), the URI's query
/// the other fields. A path variable wins over a query parameter of the same name.
pub fn from_uri<T: DeserializeOwned>(uri: &Uri, path: &[(&str, &str)]) -> Result<T, A2aError> {
    let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri).map_err(|error| {
        A2aError::new(
            ErrorKind::InvalidParams,
            format!("Invalid query string: {error}"),
        )
    })?;
    let mut fields = Map::new();
    for (name, raw) in pairs {
        let value = if BOOLEAN_FIELDS.contains(&name.as_str()) {
            match raw.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => {
                    return Err(invalid(format!(
                        "{name} must be true or false, not {raw:?}"
                    )));
                }
            }
        } else if NUMBER_FIELDS.contains(&name.as_str()) {
            let number: i64 = raw
                .parse()
                .map_err(|_| invalid(format!("{name} must be an integer, not {raw:?}")))?;
            Value::from(number)
        } else if ENUM_FIELDS.contains(&name.as_str())
            && let Ok(number) = raw.parse::<i64>()
        {
            Value::from(number)
        } else {
            Value::String(raw)
        };
        if fields.insert(name.clone(), value).is_some() {
            return Err(invalid(format!("{name} is given more than once")));
        }
    }
    for (name, value) in path {
        fields.insert((*name).to_owned(), Value::String((*value).to_owned()));
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|error| invalid(format!("Invalid query parameters: {error}")))
}

fn invalid(message: String) -> A2aError {
    A2aError::new(ErrorKind::InvalidParams, message)
}

#[cfg(test)]
mod tests {
    use super::super::pb;
    use super::*;

    fn uri(text: &str) -> Uri {
        text.parse().unwrap()
    }

    #[test]
    fn list_tasks_reads_every_filter() {
        let request: pb::ListTasksRequest = from_uri(
            &uri(
                "/tasks?contextId=c%201&status=TASK_STATE_WORKING&pageSize=20&pageToken=abc\
                 &historyLength=0&statusTimestampAfter=2026-05-28T20:26:40.000Z&includeArtifacts=true",
            ),
            &[("tenant", "acme")],
        )
        .unwrap();
        assert_eq!(request.tenant, "acme");
        assert_eq!(request.context_id, "c 1");
        assert_eq!(request.status, pb::TaskState::Working as i32);
        assert_eq!(request.page_size, Some(20));
        assert_eq!(request.page_token, "abc");
        assert_eq!(request.history_length, Some(0));
        assert_eq!(
            request.status_timestamp_after.map(|t| t.seconds),
            Some(1_780_000_000)
        );
        assert_eq!(request.include_artifacts, Some(true));
    }

    #[test]
    fn absent_parameters_stay_unset() {
        let request: pb::ListTasksRequest = from_uri(&uri("/tasks"), &[]).unwrap();
        assert_eq!(request.page_size, None);
        assert_eq!(request.include_artifacts, None);
        assert_eq!(request.status, pb::TaskState::Unspecified as i32);
    }

    #[test]
    fn path_variables_fill_the_request() {
        let request: pb::GetTaskRequest = from_uri(
            &uri("/tasks/t1?historyLength=2&id=ignored"),
            &[("id", "t1")],
        )
        .unwrap();
        assert_eq!(request.id, "t1");
        assert_eq!(request.history_length, Some(2));
        let config: pb::GetTaskPushNotificationConfigRequest = from_uri(
            &uri("/tasks/t1/pushNotificationConfigs/p1"),
            &[("taskId", "t1"), ("id", "p1")],
        )
        .unwrap();
        assert_eq!((config.task_id.as_str(), config.id.as_str()), ("t1", "p1"));
    }

    #[test]
    fn proto_field_names_and_enum_numbers_are_accepted() {
        let request: pb::ListTasksRequest =
            from_uri(&uri("/tasks?page_size=5&status=3&unknown=1"), &[]).unwrap();
        assert_eq!(request.page_size, Some(5));
        assert_eq!(request.status, pb::TaskState::Completed as i32);
    }

    #[test]
    fn malformed_parameters_are_invalid_params() {
        for query in [
            "/tasks?pageSize=ten",
            "/tasks?includeArtifacts=yes",
            "/tasks?status=TASK_STATE_BORED",
            "/tasks?statusTimestampAfter=yesterday",
            "/tasks?pageSize=1&pageSize=2",
        ] {
            let error = from_uri::<pb::ListTasksRequest>(&uri(query), &[]).expect_err(query);
            assert_eq!(error.kind, ErrorKind::InvalidParams, "{query}");
        }
    }
}
