//! `liaison connect claude-code|codex`: connects one of her agents in one command. It issues a
//! token for a new connection through the member API (`POST /api/v1/connections`, her `human`
//! token in `LIAISON_TOKEN`: the same rules as the console's Connect page) and writes the
//! client's settings with the content Connect shows (`crate::domain::client_settings`, one
//! generator): for Claude Code the project's `.mcp.json` (or `claude mcp add`), the hooks in
//! `.claude/settings.json` and the environment with the token in `.claude/settings.local.json`;
//! for Codex `config.toml` and `hooks.json` in its home.
//!
//! Idempotent: every file is read and checked first (an unreadable one stops everything before
//! a token is issued), only liaison's own entries are set, a file already right is not written,
//! and a token the settings already hold is kept while it works, so a second run changes
//! nothing and says so. What it changed, it prints.

mod files;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use serde_json::{Map, Value, json};

use self::files::Refused;
use super::ServerArgs;
use super::admin::{member_token, request_json};
use super::agent::client::Remote;
use crate::domain::client_settings::{self as settings, SERVER_NAME};

/// The clients `connect` writes settings for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json` (or `claude mcp add`) and `.claude/settings.json` in a project.
    ClaudeCode,
    /// Codex: `config.toml` and `hooks.json` in Codex's home.
    Codex,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::Codex => "codex",
        }
    }
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The client whose settings to write.
    #[arg(value_enum)]
    pub client: Client,
    /// The connection's name, which others address as you/NAME: 1-32 lowercase letters, digits
    /// and `-` [default: claude-code or codex]
    #[arg(long)]
    pub name: Option<String>,
    /// Claude Code: the project directory whose `.mcp.json` and `.claude/` are written
    /// [default: the current directory]
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Claude Code: register the server with `claude mcp add` (the token in Claude Code's own
    /// local settings) instead of writing `.mcp.json`.
    #[arg(long)]
    pub claude_mcp_add: bool,
    /// Codex: its settings directory [default: $CODEX_HOME, else ~/.codex]
    #[arg(long, env = "CODEX_HOME")]
    pub codex_home: Option<PathBuf>,
    /// Days until a new token expires, 1-365.
    #[arg(long, default_value_t = 90)]
    pub expires_in_days: u64,
    /// Issue a new token even when the settings hold one that works.
    #[arg(long)]
    pub new_token: bool,
    /// Print what would change; change nothing and issue no token.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// One settings file: where, what it held, what it will hold.
struct Planned {
    path: PathBuf,
    /// Shown relative to the project (Claude Code) or as is.
    shown: String,
    before: Option<String>,
    /// The new text; none when the file stays as it is.
    after: Option<String>,
    /// What liaison sets in it.
    what: String,
    /// It holds the token: created readable by its owner only.
    secret: bool,
}

/// The token the new settings carry.
struct Token {
    secret: String,
    /// Issued by this run (else kept from the settings).
    issued: Option<Value>,
}

/// `liaison connect`.
pub(super) async fn connect(args: ConnectArgs) -> anyhow::Result<()> {
    let server = args.server.server.trim_end_matches('/').to_owned();
    match args.client {
        Client::ClaudeCode => claude_code(&args, &server).await,
        Client::Codex => codex(&args, &server).await,
    }
}

async fn claude_code(args: &ConnectArgs, server: &str) -> anyhow::Result<()> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("Could not read the current directory")?,
    };
    anyhow::ensure!(
        dir.is_dir(),
        "{} is not a directory (--dir: the project to connect)",
        dir.display()
    );
    let consumer = args
        .name
        .clone()
        .unwrap_or_else(|| args.client.name().into());
    let mcp_path = dir.join(".mcp.json");
    let settings_path = dir.join(".claude").join("settings.json");
    let local_path = dir.join(".claude").join("settings.local.json");
    let (mcp_text, settings_text, local_text) =
        (read(&mcp_path)?, read(&settings_path)?, read(&local_path)?);
    let refused = |r: Refused| anyhow::anyhow!("{r}");
    let mcp = files::json_object(".mcp.json", mcp_text.as_deref()).map_err(refused)?;
    let mut hooks_doc =
        files::json_object(".claude/settings.json", settings_text.as_deref()).map_err(refused)?;
    let local = files::json_object(".claude/settings.local.json", local_text.as_deref())
        .map_err(refused)?;

    // The token the project's settings hold for this server, kept while it works.
    let env = &local.get("env").cloned().unwrap_or(Value::Null);
    let held_server = env["LIAISON_SERVER"]
        .as_str()
        .or_else(|| env["LIAISON_URL"].as_str())
        .map(|s| s.trim_end_matches('/'));
    let held = env["LIAISON_TOKEN"]
        .as_str()
        .filter(|_| held_server == Some(server));
    let token = token(args, server, held, &consumer, "Claude Code").await?;

    // Every edit is made on the parsed documents first; nothing is written before all succeed.
    let mut mcp_new = mcp.clone();
    let mut local_new = local.clone();
    if !args.claude_mcp_add {
        let mut entry = Map::new();
        entry.insert(SERVER_NAME.into(), settings::mcp_json_server(server));
        files::set_in(".mcp.json", &mut mcp_new, "mcpServers", &entry).map_err(refused)?;
        // The project's server, approved in her own settings (she asked for it by running this).
        files::add_to_array(
            ".claude/settings.local.json",
            &mut local_new,
            "enabledMcpjsonServers",
            SERVER_NAME,
        )
        .map_err(refused)?;
    }
    let before_hooks = hooks_doc.clone();
    files::merge_hooks(
        ".claude/settings.json",
        &mut hooks_doc,
        &settings::claude_hooks(&consumer),
    )
    .map_err(refused)?;
    let wanted_env = settings::environment(server, &token.secret, &consumer);
    files::set_in(
        ".claude/settings.local.json",
        &mut local_new,
        "env",
        wanted_env.as_object().expect("an object"),
    )
    .map_err(refused)?;
    if let Some(Value::Object(e)) = local_new.get_mut("env") {
        // The older name of LIAISON_SERVER: one name in the file.
        e.remove("LIAISON_URL");
    }

    let plan = vec![
        planned(
            &mcp_path,
            ".mcp.json",
            mcp_text,
            &mcp,
            &mcp_new,
            "mcpServers.liaison: the server over HTTP, the token from ${LIAISON_TOKEN}",
            false,
        ),
        planned(
            &settings_path,
            ".claude/settings.json",
            settings_text,
            &before_hooks,
            &hooks_doc,
            &format!("hooks: {}", events(&settings::claude_hooks(&consumer))),
            false,
        ),
        planned(
            &local_path,
            ".claude/settings.local.json",
            local_text,
            &local,
            &local_new,
            if args.claude_mcp_add {
                "env: LIAISON_SERVER, LIAISON_TOKEN, LIAISON_CONSUMER for the hooks; holds the token: keep it out of version control"
            } else {
                "env: LIAISON_SERVER, LIAISON_TOKEN, LIAISON_CONSUMER for the hooks; enabledMcpjsonServers; holds the token: keep it out of version control"
            },
            true,
        ),
    ];
    let mut changed = apply(&plan, args.dry_run)?;
    if args.claude_mcp_add {
        changed |= claude_mcp_add(&dir, server, &token.secret, args.dry_run).await?;
    }
    // Claude Code expands `${LIAISON_TOKEN}` of `.mcp.json` from the environment it starts in,
    // not from the settings' `env` (checked with Claude Code 2.1.197's `claude mcp get`).
    let exports = (!args.claude_mcp_add).then(|| {
        format!(
            "Claude Code fills in ${{LIAISON_TOKEN}} of .mcp.json from the environment it starts in: put this in that shell's profile (or use --claude-mcp-add):\nexport LIAISON_TOKEN={}",
            token.secret
        )
    });
    finish(
        args,
        &token,
        changed,
        &dir.display().to_string(),
        exports.as_deref(),
    )
}

async fn codex(args: &ConnectArgs, server: &str) -> anyhow::Result<()> {
    let home = match &args.codex_home {
        Some(h) => h.clone(),
        None => {
            let home = std::env::var_os("HOME").context("HOME is not set: give --codex-home")?;
            PathBuf::from(home).join(".codex")
        }
    };
    let consumer = args
        .name
        .clone()
        .unwrap_or_else(|| args.client.name().into());
    let config_path = home.join("config.toml");
    let hooks_path = home.join("hooks.json");
    let (config_text, hooks_text) = (read(&config_path)?, read(&hooks_path)?);
    let refused = |r: Refused| anyhow::anyhow!("{r}");
    let wanted = settings::codex_server(server);
    // In the order Connect shows them.
    let values: Vec<(&str, toml::Value)> = ["url", "bearer_token_env_var", "tool_timeout_sec"]
        .into_iter()
        .map(|k| {
            let value = match &wanted[k] {
                Value::Number(n) => toml::Value::Integer(n.as_i64().unwrap_or_default()),
                other => toml::Value::String(other.as_str().unwrap_or_default().to_owned()),
            };
            (k, value)
        })
        .collect();
    let config_new = files::codex_config(
        &config_path.display().to_string(),
        config_text.as_deref(),
        SERVER_NAME,
        &values,
    )
    .map_err(refused)?;
    let hooks = files::json_object(&hooks_path.display().to_string(), hooks_text.as_deref())
        .map_err(refused)?;
    let mut hooks_new = hooks.clone();
    files::merge_hooks(
        &hooks_path.display().to_string(),
        &mut hooks_new,
        &settings::codex_hooks(&consumer),
    )
    .map_err(refused)?;
    let plan = vec![
        Planned {
            shown: config_path.display().to_string(),
            path: config_path,
            before: config_text,
            after: config_new,
            what: "[mcp_servers.liaison]: url, bearer_token_env_var, tool_timeout_sec".into(),
            secret: false,
        },
        planned(
            &hooks_path,
            &hooks_path.display().to_string(),
            hooks_text,
            &hooks,
            &hooks_new,
            &format!(
                "hooks: {}; trust them in Codex with /hooks",
                events(&settings::codex_hooks(&consumer))
            ),
            false,
        ),
    ];
    // Codex reads the token from its environment, not from these files: a new one only when
    // the settings change (or when asked), since a working one cannot be seen here.
    let needs_token = args.new_token || plan.iter().any(|p| p.after.is_some());
    let token = if needs_token {
        token(args, server, None, &consumer, "Codex").await?
    } else {
        Token {
            secret: String::new(),
            issued: None,
        }
    };
    let changed = apply(&plan, args.dry_run)?;
    let exports = format!(
        "Codex reads the token from its environment; put these in the shell profile Codex starts from (the token is shown this once):\nexport LIAISON_SERVER={server}\nexport LIAISON_TOKEN={}\nexport LIAISON_CONSUMER={consumer}",
        token.secret
    );
    finish(
        args,
        &token,
        changed,
        &home.display().to_string(),
        Some(&exports),
    )
}

/// The token the settings will carry: the one they hold while it works (unless `--new-token`),
/// else a new one issued for the connection `name`.
async fn token(
    args: &ConnectArgs,
    server: &str,
    held: Option<&str>,
    name: &str,
    client: &str,
) -> anyhow::Result<Token> {
    if let Some(secret) = held.filter(|_| !args.new_token)
        && works(server, secret).await
    {
        return Ok(Token {
            secret: secret.to_owned(),
            issued: None,
        });
    }
    if args.dry_run {
        return Ok(Token {
            secret: "lsn_(issued when run without --dry-run)".into(),
            issued: None,
        });
    }
    let human = member_token("connect issues a connection's token with your scope human token")?;
    let body = json!({
        "name": format!("{client} ({name}), connected with liaison connect"),
        "connection": name,
        "expires_in_days": args.expires_in_days,
    });
    let answer = request_json(
        &args.server,
        &human,
        None,
        "POST",
        "/api/v1/connections",
        Some(body),
    )
    .await?;
    let issued = answer["token"].clone();
    let secret = issued["secret"]
        .as_str()
        .context("the server answered no token secret")?
        .to_owned();
    Ok(Token {
        secret,
        issued: Some(issued),
    })
}

/// Whether `secret` is a live agent token of this server (its `whoami` answers).
async fn works(server: &str, secret: &str) -> bool {
    let Ok(remote) = Remote::new(server, secret, None) else {
        return false;
    };
    let call = remote.call("whoami", json!({}), Duration::ZERO);
    matches!(
        tokio::time::timeout(Duration::from_secs(15), call).await,
        Ok(Ok(answer)) if !answer.is_error
    )
}

/// A file's text, none when absent.
fn read(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("Could not read {}", path.display())),
    }
}

/// The plan for a JSON file: written only when its content changes.
fn planned(
    path: &Path,
    shown: &str,
    before_text: Option<String>,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    what: &str,
    secret: bool,
) -> Planned {
    // An absent file that would stay empty is not created.
    let unchanged = before == after && (before_text.is_some() || after.is_empty());
    Planned {
        path: path.to_owned(),
        shown: shown.to_owned(),
        after: (!unchanged).then(|| files::json_text(after)),
        before: before_text,
        what: what.to_owned(),
        secret,
    }
}

/// The events of a hooks object, comma-separated.
fn events(hooks: &Value) -> String {
    let names: Vec<&str> = hooks
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    names.join(", ")
}

/// Writes the files that change (none with `dry_run`) and prints one line per file; answers
/// whether any changed.
fn apply(plan: &[Planned], dry_run: bool) -> anyhow::Result<bool> {
    let width = plan.iter().map(|p| p.shown.len()).max().unwrap_or(0);
    let mut changed = false;
    for p in plan {
        if p.before.is_none() && p.after.is_none() {
            continue;
        }
        let verb = match (&p.before, &p.after) {
            (_, None) => "unchanged",
            (None, Some(_)) if dry_run => "would create",
            (Some(_), Some(_)) if dry_run => "would update",
            (None, Some(_)) => "created",
            (Some(_), Some(_)) => "updated",
        };
        if let (Some(text), false) = (&p.after, dry_run) {
            write(&p.path, text, p.secret && p.before.is_none())?;
        }
        changed |= p.after.is_some();
        println!("  {verb:<12} {:<width$}  ({})", p.shown, p.what);
    }
    Ok(changed)
}

/// Writes `text` to `path` (its folder made when missing); `private`: readable by its owner only.
fn write(path: &Path, text: &str, private: bool) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("Could not create {}", parent.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    use std::io::Write as _;
    options
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("Could not write {}", path.display()))
}

/// `claude mcp add` in the project, unless Claude Code already has the server at this URL there;
/// answers whether it changed anything.
async fn claude_mcp_add(
    dir: &Path,
    server: &str,
    secret: &str,
    dry_run: bool,
) -> anyhow::Result<bool> {
    let url = format!("{server}/mcp");
    let claude = |args: &[&str]| {
        let mut c = tokio::process::Command::new("claude");
        c.args(args).current_dir(dir);
        c
    };
    let existing = claude(&["mcp", "get", SERVER_NAME])
        .output()
        .await
        .context("Could not run `claude` (is Claude Code installed and on PATH?)")?;
    let listed = String::from_utf8_lossy(&existing.stdout).into_owned();
    if existing.status.success() && listed.contains(&url) {
        println!(
            "  {:<12} claude mcp get {SERVER_NAME}  (already {url})",
            "unchanged"
        );
        return Ok(false);
    }
    if dry_run {
        println!(
            "  {:<12} claude mcp add --transport http {SERVER_NAME} {url}",
            "would run"
        );
        return Ok(true);
    }
    if existing.status.success() {
        let removed = claude(&["mcp", "remove", SERVER_NAME, "--scope", "local"])
            .output()
            .await?;
        anyhow::ensure!(
            removed.status.success(),
            "claude mcp remove {SERVER_NAME} failed: {}",
            String::from_utf8_lossy(&removed.stderr).trim()
        );
    }
    let header = format!("Authorization: Bearer {secret}");
    let added = claude(&[
        "mcp",
        "add",
        "--transport",
        "http",
        SERVER_NAME,
        &url,
        "--header",
        &header,
    ])
    .output()
    .await?;
    anyhow::ensure!(
        added.status.success(),
        "claude mcp add failed: {}",
        String::from_utf8_lossy(&added.stderr).trim()
    );
    println!(
        "  {:<12} claude mcp add --transport http {SERVER_NAME} {url} (local scope)",
        "ran"
    );
    Ok(true)
}

/// The closing lines: what was issued, or that nothing changed.
fn finish(
    args: &ConnectArgs,
    token: &Token,
    changed: bool,
    place: &str,
    exports: Option<&str>,
) -> anyhow::Result<()> {
    let client = args.client.name();
    if let Some(t) = &token.issued {
        println!(
            "Issued a token for the connection {}/{} (expires {}); revoke it on the console's Connect page.",
            t["person"].as_str().unwrap_or("?"),
            t["connection"].as_str().unwrap_or("?"),
            t["expires_at"].as_str().unwrap_or("?")
        );
    }
    if !changed && token.issued.is_none() {
        println!(
            "{client} in {place} is already connected to {}: nothing changed.",
            args.server.server
        );
        return Ok(());
    }
    if args.dry_run {
        println!("Dry run: nothing was written and no token issued.");
        return Ok(());
    }
    if let (Some(exports), Some(_)) = (exports, &token.issued) {
        println!("{exports}");
    }
    Ok(())
}
