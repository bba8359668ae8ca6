//! The card definition: `agent-card/card.toml` read and validated (identity, skills and their
//! routes, security), and the card it describes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::*;
use crate::domain::Kind;
use crate::wire::pb;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillFile {
    id: String,
    name: String,
    description: String,
    tags: Vec<String>,
    #[serde(default)]
    examples: Vec<String>,
    #[serde(default)]
    input_modes: Vec<String>,
    #[serde(default)]
    output_modes: Vec<String>,
    route: SkillRoute,
    #[serde(default)]
    reply: ReplyMode,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    organization: String,
    url: String,
}

/// The optional A2A features the card declares (`AgentCard.capabilities`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    pub streaming: bool,
    /// The push-config RPCs and inline push configs; off, they answer
    /// PushNotificationNotSupported.
    pub push_notifications: bool,
    /// GetExtendedAgentCard; off, it answers UnsupportedOperation.
    pub extended_agent_card: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CapabilitiesFile {
    #[serde(default)]
    streaming: bool,
    #[serde(default)]
    push_notifications: bool,
    #[serde(default)]
    extended_agent_card: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecurityFile {
    #[serde(default = "yes")]
    bearer: bool,
    #[serde(default)]
    openid_connect_url: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CardFile {
    name: String,
    description: String,
    version: String,
    #[serde(default)]
    documentation_url: Option<String>,
    #[serde(default)]
    icon_url: Option<String>,
    default_input_modes: Vec<String>,
    default_output_modes: Vec<String>,
    default_skill: String,
    #[serde(default)]
    provider: Option<ProviderFile>,
    capabilities: CapabilitiesFile,
    security: SecurityFile,
    skills: Vec<SkillFile>,
}

/// The validated contents of `agent-card/`: identity, skills with their routes, security.
#[derive(Debug, Clone)]
pub struct CardDefinition {
    file: CardFile,
}

impl CardDefinition {
    /// Reads and validates `<dir>/card.toml`.
    pub fn load(dir: &Path) -> Result<CardDefinition, CardError> {
        let path = dir.join(CARD_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| CardError::Read {
            path: path.clone(),
            source,
        })?;
        CardDefinition::from_toml(&text)
    }

    pub fn from_toml(text: &str) -> Result<CardDefinition, CardError> {
        let file: CardFile = toml::from_str(text)?;
        validate(&file)?;
        Ok(CardDefinition { file })
    }

    /// The name the card gives this server (`[a2a] card_name` when set, else card.toml's).
    pub fn name(&self) -> &str {
        &self.file.name
    }

    /// The same card under another name (`[a2a] card_name`), validated as card.toml's is.
    pub fn renamed(mut self, name: &str) -> Result<CardDefinition, CardError> {
        self.file.name = name.to_owned();
        validate(&self.file)?;
        Ok(self)
    }

    /// The capability switches of `[capabilities]`.
    pub fn capabilities(&self) -> Capabilities {
        let c = &self.file.capabilities;
        Capabilities {
            streaming: c.streaming,
            push_notifications: c.push_notifications,
            extended_agent_card: c.extended_agent_card,
        }
    }

    /// The route of a skill, by id.
    pub fn route(&self, skill_id: &str) -> Option<&SkillRoute> {
        self.file
            .skills
            .iter()
            .find(|skill| skill.id == skill_id)
            .map(|skill| &skill.route)
    }

    /// The skill used when neither the message nor the party names one.
    pub fn default_skill(&self) -> &str {
        &self.file.default_skill
    }

    /// Every skill id, in card order.
    pub fn skill_ids(&self) -> impl Iterator<Item = &str> {
        self.file.skills.iter().map(|skill| skill.id.as_str())
    }

    /// Every skill with its route, as the service's settings take them (`Settings::skills`).
    pub fn skill_routes(&self) -> Vec<crate::service::SkillRoute> {
        self.file
            .skills
            .iter()
            .map(|skill| crate::service::SkillRoute {
                id: skill.id.clone(),
                channel: skill.route.channel.clone(),
                kind: skill.route.kind,
                impact: skill.route.impact,
                direct_answers: skill.reply == ReplyMode::Message,
            })
            .collect()
    }

    /// The conversational skills among those listed (`skills`, all when `None`).
    fn direct_answer_skills(&self, skills: Option<&[&str]>) -> Vec<String> {
        self.file
            .skills
            .iter()
            .filter(|s| s.reply == ReplyMode::Message)
            .filter(|s| skills.is_none_or(|only| only.contains(&s.id.as_str())))
            .map(|s| s.id.clone())
            .collect()
    }

    /// Whether the card declares an OpenID Connect scheme (JWTs from a configured issuer).
    pub fn accepts_oidc(&self) -> bool {
        self.file.security.openid_connect_url.is_some()
    }

    /// The unsigned card. `skills` limits the skills listed (the extended card of a party);
    /// `None` lists them all.
    pub(crate) fn to_proto(&self, endpoints: &Endpoints, skills: Option<&[&str]>) -> pb::AgentCard {
        let file = &self.file;
        let capabilities = self.capabilities();
        let mut security_schemes = BTreeMap::new();
        let mut security_requirements = Vec::new();
        if file.security.bearer {
            security_schemes.insert(
                BEARER_SCHEME.to_owned(),
                pb::SecurityScheme {
                    scheme: Some(pb::security_scheme::Scheme::HttpAuthSecurityScheme(
                        pb::HttpAuthSecurityScheme {
                            description:
                                "A bearer token issued to your party by an admin of this gateway."
                                    .to_owned(),
                            scheme: "Bearer".to_owned(),
                            bearer_format: String::new(),
                        },
                    )),
                },
            );
            security_requirements.push(requirement(BEARER_SCHEME, "agent"));
        }
        if let Some(url) = &file.security.openid_connect_url {
            security_schemes.insert(
                OIDC_SCHEME.to_owned(),
                pb::SecurityScheme {
                    scheme: Some(pb::security_scheme::Scheme::OpenIdConnectSecurityScheme(
                        pb::OpenIdConnectSecurityScheme {
                            description: "A JWT from the configured OpenID Connect issuer."
                                .to_owned(),
                            open_id_connect_url: url.clone(),
                        },
                    )),
                },
            );
            security_requirements.push(requirement(OIDC_SCHEME, "openid"));
        }
        pb::AgentCard {
            name: file.name.clone(),
            description: file.description.clone(),
            supported_interfaces: endpoints.interfaces(),
            provider: file.provider.as_ref().map(|provider| pb::AgentProvider {
                url: provider.url.clone(),
                organization: provider.organization.clone(),
            }),
            version: file.version.clone(),
            documentation_url: file.documentation_url.clone(),
            capabilities: Some(pb::AgentCapabilities {
                streaming: Some(capabilities.streaming),
                push_notifications: Some(capabilities.push_notifications),
                extensions: extensions::declared(&self.direct_answer_skills(skills)),
                extended_agent_card: Some(capabilities.extended_agent_card),
            }),
            security_schemes,
            security_requirements,
            default_input_modes: file.default_input_modes.clone(),
            default_output_modes: file.default_output_modes.clone(),
            skills: file
                .skills
                .iter()
                .filter(|skill| skills.is_none_or(|only| only.contains(&skill.id.as_str())))
                .map(|skill| pb::AgentSkill {
                    id: skill.id.clone(),
                    name: skill.name.clone(),
                    description: skill.description.clone(),
                    tags: skill.tags.clone(),
                    examples: skill.examples.clone(),
                    input_modes: skill.input_modes.clone(),
                    output_modes: skill.output_modes.clone(),
                    security_requirements: Vec::new(),
                })
                .collect(),
            signatures: Vec::new(),
            icon_url: file.icon_url.clone(),
        }
    }
}

/// A requirement of one scheme. The role list is never empty: a2a-sdk would drop an empty one
/// from its canonical form and no longer verify our signature.
fn requirement(scheme: &str, role: &str) -> pb::SecurityRequirement {
    pb::SecurityRequirement {
        schemes: BTreeMap::from([(
            scheme.to_owned(),
            pb::StringList {
                list: vec![role.to_owned()],
            },
        )]),
    }
}

fn validate(file: &CardFile) -> Result<(), CardError> {
    let invalid = |what: String| Err(CardError::Invalid(what));
    let mut texts: Vec<(&str, &str)> = vec![
        ("name", &file.name),
        ("description", &file.description),
        ("version", &file.version),
        ("default_skill", &file.default_skill),
    ];
    texts.extend(
        file.documentation_url
            .iter()
            .map(|url| ("documentation_url", url.as_str())),
    );
    texts.extend(file.icon_url.iter().map(|url| ("icon_url", url.as_str())));
    texts.extend(
        file.security
            .openid_connect_url
            .iter()
            .map(|url| ("openid_connect_url", url.as_str())),
    );
    texts.extend(
        file.default_input_modes
            .iter()
            .map(|mode| ("default_input_modes", mode.as_str())),
    );
    texts.extend(
        file.default_output_modes
            .iter()
            .map(|mode| ("default_output_modes", mode.as_str())),
    );
    if let Some(provider) = &file.provider {
        texts.push(("provider.organization", &provider.organization));
        texts.push(("provider.url", &provider.url));
    }
    for skill in &file.skills {
        texts.push(("skills.id", &skill.id));
        texts.push(("skills.name", &skill.name));
        texts.push(("skills.description", &skill.description));
        let lists = [
            &skill.tags,
            &skill.examples,
            &skill.input_modes,
            &skill.output_modes,
        ];
        for item in lists.into_iter().flatten() {
            texts.push(("a skill's tags, examples or modes", item));
        }
    }
    for (what, text) in texts {
        if text.trim().is_empty() {
            return invalid(format!("{what} must not be empty"));
        }
        if !text.is_ascii() {
            return invalid(format!(
                "{what} must be ASCII (clients such as a2a-sdk canonicalise non-ASCII text \
                 differently from RFC 8785, and would reject the signature): {text:?}"
            ));
        }
    }
    if file.default_input_modes.is_empty() || file.default_output_modes.is_empty() {
        return invalid("default_input_modes and default_output_modes must not be empty".into());
    }
    if file.skills.is_empty() {
        return invalid("at least one skill is needed".into());
    }
    if !file.security.bearer && file.security.openid_connect_url.is_none() {
        return invalid("security must allow bearer tokens, OpenID Connect, or both".into());
    }
    let mut ids = BTreeSet::new();
    for skill in &file.skills {
        if !ids.insert(skill.id.as_str()) {
            return invalid(format!("skill id {:?} appears twice", skill.id));
        }
        if skill.tags.is_empty() {
            return invalid(format!("skill {:?} needs at least one tag", skill.id));
        }
        let route = &skill.route;
        if !route.kind.opens_thread() {
            return invalid(format!(
                "skill {:?}: a route's kind must open a thread (announce, question, request or handoff), not {}",
                skill.id, route.kind
            ));
        }
        if route.impact.is_some() && route.kind != Kind::Request {
            return invalid(format!(
                "skill {:?}: only a request route has an impact",
                skill.id
            ));
        }
    }
    if !ids.contains(file.default_skill.as_str()) {
        return invalid(format!(
            "default_skill {:?} is not a skill of the card",
            file.default_skill
        ));
    }
    Ok(())
}

/// The path of the first empty string, array or object in `value`, if any.
pub(super) fn first_empty(value: &Value, path: String) -> Option<String> {
    match value {
        Value::String(text) if text.is_empty() => Some(path),
        Value::Array(items) if items.is_empty() => Some(path),
        Value::Object(members) if members.is_empty() => Some(path),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, item)| first_empty(item, format!("{path}[{index}]"))),
        Value::Object(members) => members
            .iter()
            .find_map(|(key, member)| first_empty(member, format!("{path}.{key}"))),
        _ => None,
    }
}
