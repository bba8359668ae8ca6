//! The command line: `serve`, and the admin commands, which call the admin HTTP API of a running
//! server (`--server`, token from `LIAISON_ADMIN_TOKEN` or the bootstrap token file in the data
//! directory). `anyhow` is fine here: errors end the process with a message.

// The CLI is a client of its own server (and of the operator's), not the server reaching out:
// it builds its own HTTP clients.
#![allow(clippy::disallowed_methods)]

mod activity;
mod admin;
pub mod agent;
mod approvals;
mod backup;
mod keys;
pub mod logging;
mod member;
mod oauth;
mod outbox;
pub mod reference;
mod remotes;
mod serve;
mod table;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// `liaison --version`: the crate's version and the commit it was built from (see build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("LIAISON_GIT_COMMIT"),
    ")"
);

/// The environment variables read outside of any one option, listed under `--help`.
const ENVIRONMENT: &str = "\
Environment:
  LIAISON_TOKEN        your own token, for inbox, thread, post, claim, activity (scope agent) and approvals (scope human)
  LIAISON_ADMIN_TOKEN  an admin token for admin commands (else the bootstrap token file in --data-dir)
  LIAISON_MASTER_KEY   serve: 64 hex characters sealing the signing keys (else master.key in the data directory)
  LIAISON_<FIELD>, LIAISON_<SECTION>__<FIELD>
                       serve: any configuration field (config/liaison.example.toml)
  RUST_LOG             serve: log level and filters (default info)";

#[derive(Debug, Parser)]
#[command(
    name = "liaison",
    version = VERSION,
    about = "A gateway through which people's AI agents talk to each other, with a human's approval before anything with an effect happens.",
    after_help = ENVIRONMENT
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Initialise the data directory if empty, then serve.
    Serve(serve::ServeArgs),
    /// Back up a SQLite server, running or not, into a new directory DEST: a consistent copy of
    /// the database (SQLite's online backup API) with master.key and admin.token. PostgreSQL:
    /// pg_dump (docs/operators.md, "Backup and restore").
    Backup(backup::BackupArgs),
    /// Restore a backup directory SRC into a new data directory (--data-dir), then `serve` it.
    Restore(backup::RestoreArgs),
    /// Manage people (members and external parties).
    #[command(subcommand)]
    Person(admin::PersonCommand),
    /// Manage external A2A parties.
    #[command(subcommand)]
    Party(admin::PartyCommand),
    /// Issue, list and revoke tokens.
    #[command(subcommand)]
    Token(admin::TokenCommand),
    /// OAuth clients of the MCP authorization server (admins): `clients list`, `clients remove`.
    #[command(subcommand)]
    Oauth(oauth::OauthCommand),
    /// Manage channels, their members and approval policy.
    #[command(subcommand)]
    Channel(admin::ChannelCommand),
    /// Decide approvals (a human's token in LIAISON_TOKEN): list, show, allow, reject; `link` (admins).
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Signing keys: list, rotate (with an overlap), retire KID.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Admin webhooks (Standard Webhooks): add, list, remove, test, rotate-secret (with an
    /// overlap), disable, enable.
    #[command(subcommand)]
    Webhook(outbox::WebhookCommand),
    /// The outbox: list deliveries (--failed, --dead), show one with its attempts, retry a dead
    /// one (or every dead one of an --endpoint), endpoints with their counts.
    #[command(subcommand)]
    Deliveries(outbox::DeliveriesCommand),
    /// Remote A2A agents internal agents can delegate to: add (from a card URL), list, show,
    /// refresh, remove.
    #[command(subcommand)]
    Remote(remotes::RemoteCommand),
    /// The audit log (admins), oldest first: every approval step and every admin change, with
    /// who made it, via what (cli, api, console) and what it changed.
    Audit {
        /// RFC 3339 time: entries at or after it.
        #[arg(long)]
        since: Option<String>,
        /// Entries whose event starts with this: token., channel.policy_changed, decided.
        #[arg(long)]
        event: Option<String>,
        /// Entries made by this person.
        #[arg(long)]
        actor: Option<String>,
        /// Entries about this person, token, channel, webhook, approval or thread.
        #[arg(long)]
        subject: Option<String>,
        /// Entries after this sequence number (`next_after` of the previous page).
        #[arg(long)]
        after: Option<i64>,
        #[arg(long)]
        limit: Option<i64>,
        #[command(flatten)]
        format: table::Format,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// A single-use console login link for PERSON (admins); prints its URL.
    LoginLink {
        person: String,
        /// A link to an admin console session (PERSON must hold a live admin token).
        #[arg(long)]
        admin: bool,
        /// How long the link stays valid: seconds or 30s, 10m, 24h, 7d (default 1h, at most 7d).
        #[arg(long, value_parser = crate::domain::duration::parse)]
        expires_in: Option<crate::domain::duration::Seconds>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Your inbox (LIAISON_TOKEN): entries after your consumer's cursor, labelled as agents see them.
    Inbox(member::InboxArgs),
    /// One thread (LIAISON_TOKEN): state, claim, approvals and a page of its messages.
    Thread(member::ThreadArgs),
    /// Post a message (LIAISON_TOKEN): open a thread in a channel, or answer in one.
    Post(member::PostArgs),
    /// Claim a request or handoff thread (LIAISON_TOKEN), `next` for the oldest waiting; --release.
    Claim(member::ClaimArgs),
    /// Activity (LIAISON_TOKEN) of one channel or all yours: threads, time to answer, approvals
    /// and refusals, per week and in total since a date.
    Activity(activity::ActivityArgs),
    /// MCP over stdio, for clients that only speak stdio; forwards to a running server.
    Mcp(agent::McpArgs),
    /// Claude Code / Codex hooks: session-start and stop.
    #[command(subcommand)]
    Hook(agent::HookCommand),
    /// Wake-up relay: runs COMMAND (with a summary on stdin) when inbox entries arrive.
    Watch(agent::watch::WatchArgs),
    /// Exit 0 when the server at URL answers /readyz, else 1 (for container health checks).
    Healthcheck {
        /// Base URL of the server, e.g. http://127.0.0.1:8080
        #[arg(default_value = "http://127.0.0.1:8080")]
        url: String,
        /// Do not verify the server's TLS certificate (a local check of a server with [tls],
        /// whose certificate names its public host, not 127.0.0.1).
        #[arg(long)]
        insecure: bool,
    },
    /// Print a shell completion script, e.g. `liaison completions bash > ~/.local/share/bash-completion/completions/liaison`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// How admin commands reach the server.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Base URL of the liaison server.
    #[arg(
        long,
        global = true,
        env = "LIAISON_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// Data directory whose bootstrap admin token to use when LIAISON_ADMIN_TOKEN is not set.
    #[arg(
        long,
        global = true,
        env = "LIAISON_DATA_DIR",
        default_value = "./liaison-data"
    )]
    pub data_dir: PathBuf,
}

/// Runs the command; the result becomes the exit code in `main`.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    crate::net::tls::install_crypto_provider();
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Backup(args) => backup::backup(args),
        Command::Restore(args) => backup::restore(args),
        Command::Person(c) => admin::person(c).await,
        Command::Party(c) => admin::party(c).await,
        Command::Token(c) => admin::token(c).await,
        Command::Oauth(c) => oauth::oauth(c).await,
        Command::Channel(c) => admin::channel(c).await,
        Command::Approvals(c) => approvals::approvals(c).await,
        Command::Keys(c) => keys::keys(c).await,
        Command::Webhook(c) => outbox::webhook(c).await,
        Command::Deliveries(c) => outbox::deliveries(c).await,
        Command::Remote(c) => remotes::remote(c).await,
        Command::Audit {
            since,
            event,
            actor,
            subject,
            after,
            limit,
            format,
            server,
        } => {
            let filter = approvals::AuditArgs {
                since,
                event,
                actor,
                subject,
                after,
                limit,
            };
            approvals::audit(filter, format, server).await
        }
        Command::LoginLink {
            person,
            admin,
            expires_in,
            server,
        } => approvals::login_link(person, admin, expires_in.map(|s| s.0), server).await,
        Command::Inbox(a) => member::inbox(a).await,
        Command::Thread(a) => member::thread(a).await,
        Command::Post(a) => member::post(a).await,
        Command::Claim(a) => member::claim(a).await,
        Command::Activity(a) => activity::activity(a).await,
        Command::Mcp(args) => agent::mcp(args).await,
        Command::Hook(command) => agent::hook(command).await,
        Command::Watch(args) => agent::watch::run(args).await,
        Command::Completions { shell } => {
            use clap::CommandFactory as _;
            use std::io::Write as _;
            // Into memory first: the generator panics on a closed pipe (`| head`), we exit.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "liaison", &mut script);
            std::io::stdout().write_all(&script)?;
            Ok(())
        }
        Command::Healthcheck { url, insecure } => {
            let url = format!("{}/readyz", url.trim_end_matches('/'));
            let response = reqwest::Client::builder()
                .tls_danger_accept_invalid_certs(insecure)
                .build()?
                .get(&url)
                .timeout(std::time::Duration::from_secs(5))
                .send()
                .await?;
            anyhow::ensure!(
                response.status().is_success(),
                "{url} answered {}",
                response.status()
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};
    use crate::cli::keys::KeysCommand;
    use crate::cli::member::PostArgs;

    fn parse(args: &[&str]) -> Command {
        Cli::try_parse_from(std::iter::once("liaison").chain(args.iter().copied()))
            .unwrap()
            .command
    }

    fn post(args: &[&str]) -> PostArgs {
        let mut all = vec!["post", "--kind", "announce"];
        all.extend(args);
        match parse(&all) {
            Command::Post(post) => post,
            other => panic!("{other:?}"),
        }
    }

    /// Values that may begin with `-` are taken as values, and the options after them still
    /// parse: a key id (base64url, one in 64 begins with `-`), a post's text, free text given to
    /// an option.
    #[test]
    fn values_that_begin_with_a_hyphen_are_values() {
        let kid = "-dmIAjETmgBpGu22S1nA0It4cPCDCVYWY8wLTgH-JYE";
        let Command::Keys(KeysCommand::Retire {
            kid: parsed,
            server,
        }) = parse(&["keys", "retire", kid, "--server", "http://127.0.0.1:9"])
        else {
            panic!("not keys retire");
        };
        assert_eq!(parsed, kid);
        assert_eq!(server.server, "http://127.0.0.1:9");

        for text in ["- first item", "-1 is the answer", "-"] {
            let post = post(&["--channel", "demo", text]);
            assert_eq!(post.body, text);
            assert_eq!(post.channel.as_deref(), Some("demo"));
        }
        let post = post(&["--subject", "-3 °C tonight", "--channel", "demo", "body"]);
        assert_eq!(post.subject.as_deref(), Some("-3 °C tonight"));
        let reject = parse(&[
            "approvals",
            "reject",
            "apr_1",
            "--reason",
            "- not before Monday",
        ]);
        assert!(format!("{reject:?}").contains("- not before Monday"));
        // An unknown option is still refused as an option.
        assert!(Cli::try_parse_from(["liaison", "keys", "list", "--nope"]).is_err());
    }
}
