//! What a remote agent's answers mean in liaison's terms: a wire task, status or message as a
//! [`RemoteUpdate`] (the state, the text, a key telling this event apart, a completed task's
//! artifacts), and a failed call as an attempt's result for the outbox's retry rules.
//!
//! Pure conversion over the A2A protocol types; the follower and the sender (`crate::workers`)
//! and the push receiver (`crate::a2a`) use it. Knows nothing of the service.

use std::time::Duration;

use super::CallError;
use crate::domain::delivery::{SendFailure, SendResult};
use crate::domain::{
    ENVELOPE_EXTENSION, Envelope, Kind, RESULT_MEDIA_TYPE, RemoteState, RemoteUpdate, ReplyResult,
};
use crate::wire::pb;

/// The first and longest wait between two polls of a task that does not change.
pub const POLL_MIN: Duration = Duration::from_secs(1);
pub const POLL_MAX: Duration = Duration::from_secs(30);
/// How often a task followed by push is read anyway (a push may be lost).
pub const PUSH_SAFETY: Duration = Duration::from_secs(60);
pub fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A task state from the wire; `None` for an unspecified (or unknown) state.
pub fn state_of(s: i32) -> Option<RemoteState> {
    Some(match pb::TaskState::try_from(s).ok()? {
        pb::TaskState::Submitted => RemoteState::Submitted,
        pb::TaskState::Working => RemoteState::Working,
        pb::TaskState::InputRequired => RemoteState::InputRequired,
        pb::TaskState::AuthRequired => RemoteState::AuthRequired,
        pb::TaskState::Completed => RemoteState::Completed,
        pb::TaskState::Failed => RemoteState::Failed,
        pb::TaskState::Rejected => RemoteState::Rejected,
        pb::TaskState::Canceled => RemoteState::Canceled,
        pb::TaskState::Unspecified => return None,
    })
}

fn text_of(m: Option<&pb::Message>) -> String {
    m.map(|m| {
        m.parts
            .iter()
            .filter_map(|p| match &p.content {
                Some(pb::part::Content::Text(t)) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    })
    .unwrap_or_default()
}

/// What a status says, keyed by its message id, else its timestamp, else its text.
pub fn status_update(task_id: &str, status: &pb::TaskStatus) -> Result<RemoteUpdate, String> {
    let state = state_of(status.state)
        .ok_or_else(|| format!("the remote sent task {task_id} without a known state"))?;
    let text = text_of(status.message.as_ref());
    let event_key = match (&status.message, &status.timestamp) {
        (Some(m), _) if !m.message_id.is_empty() => format!("message:{}", m.message_id),
        (_, Some(t)) => format!("at:{}", serde_json::to_string(t).unwrap_or_default()),
        _ => format!("text:{text}"),
    };
    // The status message's other parts (a closing message's files and data) come with its
    // words; parts that cannot be taken in leave the words alone.
    let attachments = status
        .message
        .as_ref()
        .and_then(|m| crate::wire::parts::parts_in(m.parts.clone()).ok())
        .map(|(_, attachments)| attachments)
        .unwrap_or_default();
    Ok(RemoteUpdate {
        task_id: task_id.to_owned(),
        state,
        text,
        event_key,
        attachments,
        result: None,
    })
}

/// A whole task as an update: its status, and when completed its artifacts (text parts join the
/// body after the status text; the other parts become attachments).
pub fn task_update(task: &pb::Task) -> Result<RemoteUpdate, String> {
    if task.id.is_empty() {
        return Err("the remote sent a task without an id".into());
    }
    let status = task
        .status
        .as_ref()
        .ok_or_else(|| format!("the remote sent task {} without a status", task.id))?;
    let mut update = status_update(&task.id, status)?;
    if update.state == RemoteState::Completed {
        // Another liaison's reply says its structured result in its envelope; its copy as a data
        // part (for other clients) is then not an attachment too.
        update.result = task.artifacts.iter().find_map(artifact_result);
        let parts: Vec<pb::Part> = task
            .artifacts
            .iter()
            .flat_map(|a| a.parts.iter().cloned())
            .filter(|p| update.result.is_none() || p.media_type != RESULT_MEDIA_TYPE)
            .collect();
        let (text, attachments) =
            crate::wire::parts::parts_in(parts).map_err(|e| format!("an artifact: {e}"))?;
        if !text.is_empty() {
            if !update.text.is_empty() {
                update.text.push_str("\n\n");
            }
            update.text.push_str(&text);
        }
        update.attachments.extend(attachments);
    }
    Ok(update)
}

/// The structured result an artifact's liaison envelope carries; data that is not a valid
/// envelope of a reply is ignored with a warning.
fn artifact_result(a: &pb::Artifact) -> Option<ReplyResult> {
    let value = a.metadata.as_ref()?.fields.get(ENVELOPE_EXTENSION)?;
    let parsed = serde_json::to_value(value)
        .map_err(|e| e.to_string())
        .and_then(Envelope::from_json);
    match parsed {
        Ok(envelope) if envelope.kind == Kind::Reply => envelope.result,
        Ok(envelope) => {
            tracing::warn!(kind = %envelope.kind, "Ignored a liaison envelope on an artifact that is not a reply's.");
            None
        }
        Err(why) => {
            tracing::warn!(
                extension = ENVELOPE_EXTENSION,
                "Ignored malformed liaison envelope data on an artifact: {why}."
            );
            None
        }
    }
}

/// A direct message answer (no task): a completed exchange.
pub fn message_update(m: &pb::Message) -> Result<RemoteUpdate, String> {
    let (text, attachments) = crate::wire::parts::parts_in(m.parts.clone())
        .map_err(|e| format!("the remote's answer: {e}"))?;
    Ok(RemoteUpdate {
        task_id: format!("message:{}", m.message_id),
        state: RemoteState::Completed,
        text,
        event_key: format!("message:{}", m.message_id),
        attachments,
        result: None,
    })
}

/// A failed call as an attempt's result (for the outbox's retry rules).
pub fn send_result(e: &CallError) -> SendResult {
    match e {
        CallError::Transport(f) => SendResult::Failed(f.clone()),
        CallError::Status { code, retry_after } => SendResult::Status {
            code: *code,
            retry_after: *retry_after,
        },
        other if other.retryable() => SendResult::Failed(SendFailure::Request(other.to_string())),
        other => SendResult::Failed(SendFailure::Refused(other.to_string())),
    }
}

/// The remote says the task is unknown or cannot be canceled any more.
pub fn task_gone(e: &CallError) -> bool {
    match e {
        CallError::Remote(r) => {
            matches!(
                r.reason.as_deref(),
                Some("TASK_NOT_FOUND" | "TASK_NOT_CANCELABLE")
            ) || matches!(r.code, -32001 | -32002)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::wire::parts::text_part as text;

    fn status(state: pb::TaskState, note: Option<(&str, &str)>) -> pb::TaskStatus {
        pb::TaskStatus {
            state: state as i32,
            message: note.map(|(id, t)| pb::Message {
                message_id: id.into(),
                role: pb::Role::Agent as i32,
                parts: vec![text(t)],
                ..Default::default()
            }),
            timestamp: None,
        }
    }

    #[test]
    fn every_wire_state_but_unspecified_is_known() {
        for (wire, ours) in [
            (pb::TaskState::Submitted, RemoteState::Submitted),
            (pb::TaskState::Working, RemoteState::Working),
            (pb::TaskState::InputRequired, RemoteState::InputRequired),
            (pb::TaskState::AuthRequired, RemoteState::AuthRequired),
            (pb::TaskState::Completed, RemoteState::Completed),
            (pb::TaskState::Failed, RemoteState::Failed),
            (pb::TaskState::Rejected, RemoteState::Rejected),
            (pb::TaskState::Canceled, RemoteState::Canceled),
        ] {
            assert_eq!(state_of(wire as i32), Some(ours));
        }
        assert_eq!(state_of(pb::TaskState::Unspecified as i32), None);
        assert_eq!(state_of(99), None);
    }

    #[test]
    fn a_completed_task_brings_its_artifacts_text_in_the_body_the_rest_attached() {
        let task = pb::Task {
            id: "t1".into(),
            status: Some(status(pb::TaskState::Completed, Some(("m9", "Done.")))),
            artifacts: vec![pb::Artifact {
                artifact_id: "a1".into(),
                parts: vec![
                    text("the answer"),
                    pb::Part {
                        content: Some(pb::part::Content::Raw(b"bytes".to_vec())),
                        filename: "r.txt".into(),
                        media_type: "text/plain".into(),
                        ..Default::default()
                    },
                    pb::Part {
                        content: Some(pb::part::Content::Url("https://x.example/f".into())),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let u = task_update(&task).unwrap();
        assert_eq!(u.state, RemoteState::Completed);
        assert_eq!(u.text, "Done.\n\nthe answer");
        assert_eq!(u.event_key, "message:m9");
        assert_eq!(u.attachments.len(), 2);
    }

    #[test]
    fn an_interrupted_task_brings_no_artifacts_and_a_task_without_id_or_state_is_refused() {
        let mut task = pb::Task {
            id: "t1".into(),
            status: Some(status(
                pb::TaskState::InputRequired,
                Some(("m1", "Which one?")),
            )),
            artifacts: vec![pb::Artifact {
                parts: vec![text("draft")],
                ..Default::default()
            }],
            ..Default::default()
        };
        let u = task_update(&task).unwrap();
        assert_eq!(
            (u.state, u.text.as_str()),
            (RemoteState::InputRequired, "Which one?")
        );
        assert!(u.attachments.is_empty());
        task.status = Some(status(pb::TaskState::Unspecified, None));
        assert!(task_update(&task).is_err());
        task.status = None;
        assert!(task_update(&task).is_err());
        task.id.clear();
        assert!(task_update(&task).is_err());
    }

    #[test]
    fn an_event_is_keyed_by_its_message_id_else_its_time_else_its_text() {
        let with_id =
            status_update("t", &status(pb::TaskState::Working, Some(("m1", "a")))).unwrap();
        let no_id = status_update("t", &status(pb::TaskState::Working, Some(("", "a")))).unwrap();
        let other = status_update("t", &status(pb::TaskState::Working, Some(("", "b")))).unwrap();
        assert_eq!(with_id.event_key, "message:m1");
        assert_ne!(no_id.event_key, other.event_key);
    }

    #[test]
    fn a_failed_call_keeps_its_status_and_retryability_for_the_outbox() {
        let status = CallError::Status {
            code: 503,
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(
            send_result(&status),
            SendResult::Status {
                code: 503,
                retry_after: Some(Duration::from_secs(7))
            }
        );
        let refused = CallError::Undecodable("garbage".into());
        assert!(matches!(
            send_result(&refused),
            SendResult::Failed(SendFailure::Refused(_))
        ));
    }
}
