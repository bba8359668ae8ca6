//! The demo of `serve --demo`: members `alice` and `bob`, the channel `demo` between them, the
//! external party `partner`, their tokens, and the ready-to-paste client settings. The same facts
//! go to `demo.json` in the data directory, so a second `serve --demo` reuses them.

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::domain::{ChannelName, PersonId, PersonKind, Scope, Scopes};
use crate::service::{ChannelSpec, PartySpec, TokenSpec};

pub const DEMO_FILE: &str = "demo.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Demo {
    pub url: String,
    pub mcp_url: String,
    pub channel: String,
    pub alice: PersonTokens,
    pub bob: PersonTokens,
    pub partner: PersonTokens,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PersonTokens {
    pub agent_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_token: Option<String>,
}

/// Creates the demo on first use; afterwards reads `demo.json` (with the current URLs).
pub async fn ensure(app: &App) -> anyhow::Result<Demo> {
    let path = app.data_dir().join(DEMO_FILE);
    let service = app.service();
    let admin = service.system_admin().await?;
    let alice = PersonId::parse("alice").expect("slug");
    let exists = service.store().person(&alice).await?.is_some();
    let mut demo = if exists {
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "The demo people exist but {} is missing; use a fresh data directory",
                path.display()
            )
        })?;
        serde_json::from_str::<Demo>(&text)
            .with_context(|| format!("Invalid {}", path.display()))?
    } else {
        let mut tokens = Vec::new();
        for (id, name) in [("alice", "Alice"), ("bob", "Bob")] {
            let id = PersonId::parse(id).expect("slug");
            service
                .add_person(&admin, id.clone(), PersonKind::Member, name.into())
                .await?;
            let issue = |scope: Scope| TokenSpec {
                person: id.clone(),
                scopes: Scopes::default().with(scope),
                expires_in_s: None,
                description: format!("demo {scope} token"),
            };
            let agent_token = service
                .issue_token(&admin, issue(Scope::Agent))
                .await?
                .secret;
            let human_token = Some(
                service
                    .issue_token(&admin, issue(Scope::Human))
                    .await?
                    .secret,
            );
            tokens.push(PersonTokens {
                agent_token,
                human_token,
            });
        }
        let party = PartySpec {
            id: PersonId::parse("partner").expect("slug"),
            display_name: "Partner Corp".into(),
            default_skill: None,
            jwt_subject: None,
            issue_token: true,
            channels: Vec::new(),
        };
        let token = service.add_party(&admin, party).await?.token;
        let agent_token = token.expect("a party token was asked for").secret;
        tokens.push(PersonTokens {
            agent_token,
            human_token: None,
        });
        let bob = PersonId::parse("bob").expect("slug");
        let spec = ChannelSpec {
            name: ChannelName::parse("demo").expect("slug"),
            description: "Alice and Bob's demo channel".into(),
            members: vec![alice.clone(), bob.clone()],
            rights: None,
            policy: None,
        };
        service.add_channel(&admin, spec).await?;
        // The channels the card's skills route to, shared by the members and the party.
        let mut routed: Vec<ChannelName> = service
            .settings()
            .skills
            .iter()
            .map(|s| s.channel.clone())
            .collect();
        routed.push(ChannelName::parse("partners").expect("slug"));
        routed.sort();
        routed.dedup();
        for name in routed {
            let spec = ChannelSpec {
                name,
                description: "Tasks delegated by external parties".into(),
                members: vec![
                    alice.clone(),
                    bob.clone(),
                    PersonId::parse("partner").expect("slug"),
                ],
                rights: None,
                policy: None,
            };
            service.add_channel(&admin, spec).await?;
        }
        let mut tokens = tokens.into_iter();
        let mut next = || tokens.next().expect("three people");
        Demo {
            url: String::new(),
            mcp_url: String::new(),
            channel: "demo".into(),
            alice: next(),
            bob: next(),
            partner: next(),
        }
    };
    demo.url = app.public_url().to_owned();
    demo.mcp_url = format!("{}/mcp", app.public_url());
    let text = serde_json::to_string_pretty(&demo)?;
    crate::app::write_secret_file(&path, &text)?;
    Ok(demo)
}

/// What `serve --demo` prints: the people, their tokens and what each is for, client settings to
/// paste, and where `demo.json` is (`path`, made absolute when it can be).
pub fn instructions(d: &Demo, path: &std::path::Path) -> String {
    let file = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let file = file.display();
    let alice = &d.alice.agent_token;
    let bob = &d.bob.agent_token;
    format!(
        r#"Demo ready: members alice and bob share channel "{channel}"; partner is an external A2A party
whose tasks open threads in channel "partners" (alice and bob answer them).

  alice  agent token: {alice}
         human token: {alice_human}
  bob    agent token: {bob}
         human token: {bob_human}
  partner agent token: {partner}

Agent tokens are for agents: MCP clients, and the member commands liaison inbox, thread, post, claim.
Human tokens are for alice and bob themselves, to decide approvals:
  LIAISON_TOKEN=<human token> liaison approvals list --pending
and the web console at {url}/console (sign in with a link from: liaison login-link alice).

Claude Code (as alice):
  claude mcp add --transport http liaison {mcp} --header "Authorization: Bearer {alice}"

Codex (as bob), in ~/.codex/config.toml, with LIAISON_TOKEN={bob} in the environment:
  [mcp_servers.liaison]
  url = "{mcp}"
  bearer_token_env_var = "LIAISON_TOKEN"
  tool_timeout_sec = 120

An A2A client (as partner): the signed card is at {url}/.well-known/agent-card.json;
  curl -s {url}/a2a/jsonrpc -H 'A2A-Version: 1.0' -H 'Authorization: Bearer {partner}' \
    -H 'Content-Type: application/json' -d '{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"m1","role":"ROLE_USER","parts":[{{"text":"Which TLS versions do you accept?"}}]}},"configuration":{{"returnImmediately":true}}}}}}'

Or with the official A2A SDK, over any binding (in a venv with a2a-sdk[grpc,signing] and httpx):
  python3 examples/a2a_delegate.py --demo {file} --binding GRPC --skill handoff "Which TLS versions?"

Watch two agents talk and an A2A task complete (creates .venv when missing):
  scripts/demo.sh {file}

The same facts are in {file}.
"#,
        channel = d.channel,
        alice_human = d.alice.human_token.as_deref().unwrap_or("-"),
        bob_human = d.bob.human_token.as_deref().unwrap_or("-"),
        partner = d.partner.agent_token,
        mcp = d.mcp_url,
        url = d.url,
    )
}
