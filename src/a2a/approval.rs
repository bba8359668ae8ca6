//! A task's human approval as A2A clients read it: besides the status text ("Awaiting approval by
//! …"), the status message carries the approval as data under the extension
//! [`APPROVAL_EXTENSION`], declared on the card.
//!
//! Why not `TASK_STATE_AUTH_REQUIRED` (the hook the a2a-itk human-approval proposal builds on): in
//! A2A it asks the *client* to authenticate or authorize and is an interrupted state, so blocking
//! sends and streams return there and SDKs treat it as "the caller must act". Here the decision
//! belongs to a human of the team; the party can do nothing but wait, and SPEC §8 keeps such a task
//! `SUBMITTED` (not yet claimed). A declared extension lets a client that knows it show who must
//! decide and what was decided, on every binding, in GetTask, ListTasks, streams and pushes alike,
//! and costs nothing to one that does not. docs/a2a-clients.md describes the data.

use crate::service::TaskApproval;
use crate::wire::pb;

/// The URI the approval data is keyed by in `status.message.metadata`.
pub const APPROVAL_EXTENSION: &str = "urn:liaison:a2a:approval:v1";

/// `message` (a status message about the task's approval) with the approval as data: `state`
/// (`pending`, `approved`, `consumed`, `rejected`, `expired` or `withdrawn`), `approvalId`, `approvers` (who
/// may decide) and, once decided, `decidedBy`.
pub fn note(mut message: pb::Message, approval: &TaskApproval) -> pb::Message {
    let mut data = serde_json::json!({
        "state": approval.state.to_string(),
        "approvalId": approval.id.to_string(),
        "approvers": approval.approvers,
    });
    if let Some(by) = &approval.decided_by {
        data["decidedBy"] = by.clone().into();
    }
    if let Ok(value) = serde_json::from_value::<pbjson_types::Value>(data) {
        let metadata = message.metadata.get_or_insert_with(Default::default);
        metadata.fields.insert(APPROVAL_EXTENSION.to_owned(), value);
        if !message.extensions.iter().any(|e| e == APPROVAL_EXTENSION) {
            message.extensions.push(APPROVAL_EXTENSION.to_owned());
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ApprovalState;

    fn approval(state: ApprovalState, decided_by: Option<&str>) -> TaskApproval {
        TaskApproval {
            id: crate::domain::ApprovalId::generate(),
            state,
            approvers: vec!["Alice".into(), "Bob".into()],
            decided_by: decided_by.map(Into::into),
        }
    }

    fn data(message: &pb::Message) -> serde_json::Value {
        let metadata = message.metadata.as_ref().unwrap();
        serde_json::to_value(&metadata.fields[APPROVAL_EXTENSION]).unwrap()
    }

    #[test]
    fn a_pending_approval_names_who_may_decide_and_a_decision_who_decided() {
        let pending = approval(ApprovalState::Pending, None);
        let note = note(pb::Message::default(), &pending);
        let value = data(&note);
        assert_eq!(value["state"], "pending");
        assert_eq!(value["approvalId"], pending.id.to_string());
        assert_eq!(value["approvers"], serde_json::json!(["Alice", "Bob"]));
        assert!(value.get("decidedBy").is_none());
        assert_eq!(note.extensions, [APPROVAL_EXTENSION]);
        let rejected = note_of(ApprovalState::Rejected, Some("Bob"));
        assert_eq!(data(&rejected)["state"], "rejected");
        assert_eq!(data(&rejected)["decidedBy"], "Bob");
        // Applied twice (a note already carrying it), the extension is listed once.
        let again = super::note(rejected, &approval(ApprovalState::Rejected, Some("Bob")));
        assert_eq!(again.extensions, [APPROVAL_EXTENSION]);
    }

    fn note_of(state: ApprovalState, by: Option<&str>) -> pb::Message {
        note(pb::Message::default(), &approval(state, by))
    }
}
