//! The A2A extensions the card declares (`capabilities.extensions`): liaison's envelope, the
//! approval data of a waiting task, and which skills answer with a bare message.

use crate::domain::ENVELOPE_EXTENSION;
use crate::wire::pb;

/// Declares that the skills in its `params.skills` are conversational: a message to one of them
/// may be answered with a bare `Message` (A2A's "a task or a message") when the team answers with
/// a single reply within the blocking wait; any other answer is the task.
pub const DIRECT_ANSWERS_EXTENSION: &str = "urn:liaison:a2a:direct-answers:v1";

/// The extensions of a card that lists `direct_answer_skills` among its conversational skills
/// (the direct-answers extension only when there is one).
pub(super) fn declared(direct_answer_skills: &[String]) -> Vec<pb::AgentExtension> {
    let mut extensions = vec![pb::AgentExtension {
        uri: ENVELOPE_EXTENSION.to_owned(),
        description: "liaison's envelope: a message's kind, a request's impact and a reply's \
                      structured result, in message.metadata under this URI. Honoured only within \
                      the sender's skills, and only to strengthen a route: a request with an \
                      effect always meets this team's approval."
            .to_owned(),
        required: false,
        params: None,
    }];
    extensions.push(pb::AgentExtension {
        uri: crate::a2a::approval::APPROVAL_EXTENSION.to_owned(),
        description: "A task whose request waits for a human of the team stays SUBMITTED; its \
                      status message carries the approval in metadata under this URI: state \
                      (pending, approved, consumed, rejected, expired), approvalId, approvers and, \
                      once decided, decidedBy. A rejection or expiry ends the task REJECTED with \
                      the same data."
            .to_owned(),
        required: false,
        params: None,
    });
    if !direct_answer_skills.is_empty() {
        let skills = direct_answer_skills
            .iter()
            .map(|id| pbjson_types::Value {
                kind: Some(pbjson_types::value::Kind::StringValue(id.clone())),
            })
            .collect();
        let list = pbjson_types::Value {
            kind: Some(pbjson_types::value::Kind::ListValue(
                pbjson_types::ListValue { values: skills },
            )),
        };
        extensions.push(pb::AgentExtension {
            uri: DIRECT_ANSWERS_EXTENSION.to_owned(),
            description: "The skills in params.skills are conversational: SendMessage (blocking) \
                          and SendStreamingMessage answer with a Message when the team answers \
                          with a single reply within the wait, and with the task otherwise."
                .to_owned(),
            required: false,
            params: Some(pbjson_types::Struct {
                fields: [("skills".to_owned(), list)].into_iter().collect(),
            }),
        });
    }
    extensions
}

#[cfg(test)]
mod tests {
    use super::super::CardDefinition;
    use super::*;

    const CARD: &str = include_str!("../../../agent-card/card.toml");

    fn endpoints() -> super::super::Endpoints {
        super::super::Endpoints::standard("https://gw.example/", None)
    }

    fn direct_answer_skills(card: &pb::AgentCard) -> Option<Vec<String>> {
        let ext = card
            .capabilities
            .as_ref()?
            .extensions
            .iter()
            .find(|e| e.uri == DIRECT_ANSWERS_EXTENSION)?;
        let value = serde_json::to_value(ext.params.as_ref()?).ok()?;
        serde_json::from_value(value["skills"].clone()).ok()
    }

    #[test]
    fn the_card_names_its_conversational_skills_and_the_routes_say_so() {
        let definition = CardDefinition::from_toml(CARD).unwrap();
        let card = definition.to_proto(&endpoints(), None);
        assert_eq!(direct_answer_skills(&card), Some(vec!["chat".to_owned()]));
        let routes = definition.skill_routes();
        let direct: Vec<&str> = routes
            .iter()
            .filter(|r| r.direct_answers)
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(direct, ["chat"]);
        // An extended card without a conversational skill declares no such extension.
        let extended = definition.to_proto(&endpoints(), Some(&["ask"]));
        assert_eq!(direct_answer_skills(&extended), None);
        assert!(
            extended
                .capabilities
                .unwrap()
                .extensions
                .iter()
                .any(|e| e.uri == crate::domain::ENVELOPE_EXTENSION)
        );
    }

    #[test]
    fn a_reply_mode_other_than_task_or_message_is_refused() {
        let bad = CARD.replace("reply = \"message\"", "reply = \"chat\"");
        let err = CardDefinition::from_toml(&bad).unwrap_err().to_string();
        assert!(
            err.contains("reply") || err.contains("unknown variant"),
            "{err}"
        );
    }
}
