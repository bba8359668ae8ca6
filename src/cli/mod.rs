//! The command line: `serve`, and the admin commands, which call the admin HTTP API of a running
//! server (`--server`, token from `LIAISON_ADMIN_TOKEN` or the bootstrap token file in the data
//! directory). `anyhow` is fine here: errors end the process with a message.
//!
//! Every command that talks to a running server names it the same way: `--server` /
//! `LIAISON_SERVER` ([`ServerArgs`], and the agent helpers' [`agent::Connection`]). The agent
//! helpers' older spelling `--url` / `LIAISON_URL` (in settings files written before) still works,
//! hidden: see [`default_server`].

// The CLI is a client of its own server (and of the operator's), not the server reaching out:
// it builds its own HTTP clients.
#![allow(clippy::disallowed_methods)]

mod activity;
mod admin;
pub mod agent;
mod approvals;
mod backup;
mod connect;
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
const ENVIRONMENT: &str = concat!(
    "\
Environment:
  LIAISON_SERVER       the server's base URL, for every command but serve (default http://127.0.0.1:8080)
  LIAISON_TOKEN        your own token, for inbox, thread, post, claim, activity, hooks, mcp, watch (scope agent);
                       approvals and connect (scope human)
  LIAISON_ADMIN_TOKEN  an admin token for admin commands (else the bootstrap token file in --data-dir)
  LIAISON_MASTER_KEY   serve: 64 hex characters sealing the signing keys (else master.key in the data directory)
  LIAISON_<FIELD>, LIAISON_<SECTION>__<FIELD>
                       serve: any configuration field (config/liaison.example.toml)
  RUST_LOG             serve: log level and filters (default ", logging::default_filter!(), ")");

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
    /// Connect one of your agents (LIAISON_TOKEN with scope human): issues a token for a new
    /// connection and writes Claude Code's or Codex's settings with it (MCP server and hooks),
    /// keeping everything else in those files; run twice, it changes nothing.
    Connect(connect::ConnectArgs),
    /// MCP over stdio, for clients that only speak stdio; forwards to a running server.
    Mcp(agent::McpArgs),
    /// Claude Code / Codex hooks: session-start, stop, pre-tool-use, permission-request,
    /// tool-use (what each does: `liaison hook --help`).
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

/// The server's base URL when neither `--server` nor `LIAISON_SERVER` is given.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// The value of `--server` when the option and `LIAISON_SERVER` are both absent: the older
/// variable `LIAISON_URL` (the agent helpers' first spelling, still in settings files written
/// before), else [`DEFAULT_SERVER`]. The option's help says the default, not this value, so
/// `--help` and the generated reference never depend on the environment they were made in.
pub fn default_server() -> String {
    std::env::var("LIAISON_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned())
}

/// How admin and member commands reach the server.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Base URL of the liaison server [default: http://127.0.0.1:8080]
    #[arg(
        long,
        global = true,
        alias = "url",
        env = "LIAISON_SERVER",
        default_value_t = default_server(),
        hide_default_value = true
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
        Command::Connect(args) => connect::connect(args).await,
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

    /// The long help of the command at `path` (`[]`: `liaison --help`).
    fn help(path: &[&str]) -> String {
        use clap::CommandFactory as _;
        let mut command = Cli::command();
        command.build();
        let mut at = &mut command;
        for name in path {
            at = at.find_subcommand_mut(name).expect("a subcommand");
        }
        at.render_long_help().to_string()
    }

    #[test]
    fn the_top_help_names_every_hook_and_the_default_log_filter_of_the_guide() {
        use clap::CommandFactory as _;
        let top = help(&[]);
        let hooks = Cli::command();
        let hooks = hooks.find_subcommand("hook").unwrap();
        let names: Vec<&str> = hooks.get_subcommands().map(|c| c.get_name()).collect();
        assert!(names.len() >= 5, "{names:?}");
        for name in names {
            assert!(
                top.contains(name),
                "`liaison --help` does not name the hook {name}"
            );
        }
        let filter = crate::cli::logging::DEFAULT_FILTER;
        assert!(top.contains(&format!("(default {filter})")), "{top}");
        let guide = include_str!("../../docs/operators.md");
        assert!(
            guide.contains(&format!("Without `RUST_LOG` the filter is `{filter}`")),
            "docs/operators.md must say the default filter {filter}"
        );
    }

    #[test]
    fn helpers_that_are_not_hooks_do_not_explain_a_hook() {
        for path in [&["watch"][..], &["mcp"], &["hook", "session-start"]] {
            let text = help(path);
            assert!(
                !text.contains("Stop hook") && !text.contains("exit code 2"),
                "{path:?}: {text}"
            );
        }
        assert!(help(&["hook", "stop"]).contains("exits 2"));
    }

    #[test]
    fn every_command_names_the_server_with_server_and_still_takes_url() {
        use clap::CommandFactory as _;
        // No visible --url anywhere: one name for one thing.
        fn walk(c: &clap::Command, path: &str, bad: &mut Vec<String>) {
            for arg in c.get_arguments() {
                if arg.get_long() == Some("url") {
                    bad.push(format!("{path} --url"));
                }
                if arg.get_long() == Some("server") {
                    assert_eq!(
                        arg.get_env().and_then(|e| e.to_str()),
                        Some("LIAISON_SERVER")
                    );
                }
            }
            for sub in c.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), bad);
            }
        }
        let mut bad = Vec::new();
        walk(&Cli::command(), "liaison", &mut bad);
        assert!(bad.is_empty(), "{bad:?}");
        for args in [
            &["hook", "stop", "--url", "http://h:1"][..],
            &[
                "watch",
                "--consumer",
                "c",
                "--url",
                "http://h:1",
                "--",
                "true",
            ],
            &["inbox", "--url", "http://h:1"],
            &["keys", "list", "--url", "http://h:1"],
        ] {
            let parsed =
                Cli::try_parse_from(std::iter::once("liaison").chain(args.iter().copied()));
            assert!(
                format!("{:?}", parsed.expect("the old spelling parses")).contains("http://h:1"),
                "{args:?}"
            );
        }
        let text = help(&["hook", "stop"]);
        assert!(
            text.contains("--server") && !text.contains("--url"),
            "{text}"
        );
    }

    #[test]
    fn keys_rotate_shows_both_spellings_of_the_overlap() {
        let text = help(&["keys", "rotate"]);
        assert!(
            text.contains("--overlap <OVERLAP>") && text.contains("--overlap-days"),
            "{text}"
        );
        let Command::Keys(KeysCommand::Rotate { overlap_days, .. }) =
            parse(&["keys", "rotate", "--overlap-days", "3"])
        else {
            panic!("not keys rotate");
        };
        assert_eq!(overlap_days, Some(3));
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
