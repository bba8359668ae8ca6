//! `liaison backup DEST` and `liaison restore SRC`: a consistent copy of a live SQLite database
//! (SQLite's online backup API, through the store) with the data directory's secrets, and back
//! into a new data directory. PostgreSQL is backed up with its own tools (`pg_dump`); both
//! commands refuse it with that advice.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::logging::say;
use crate::app::{ADMIN_TOKEN_FILE, MASTER_KEY_FILE};
use crate::config::{Config, Overrides, SQLITE_FILE};
use crate::keys::ring::MASTER_KEY_ENV;
use crate::store::Store;

/// Where the database and the data directory are, as `serve` finds them.
#[derive(Debug, Args)]
pub struct Location {
    /// Configuration file (TOML); see config/liaison.example.toml.
    #[arg(long, env = "LIAISON_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory [default: ./liaison-data]
    #[arg(long, env = "LIAISON_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Database URL [default: sqlite in the data directory]
    #[arg(long, env = "LIAISON_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// A new (or empty) directory to write the backup to: liaison.db, master.key, admin.token.
    pub dest: PathBuf,
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// A directory `liaison backup` wrote.
    pub src: PathBuf,
    #[command(flatten)]
    pub location: Location,
}

/// The data directory's files a backup carries besides the database: the master key (without it
/// the signing keys and every sealed secret in the database cannot be opened) and the bootstrap
/// admin token (a copy of a token whose hash the database holds).
const SECRET_FILES: [&str; 2] = [MASTER_KEY_FILE, ADMIN_TOKEN_FILE];

impl Location {
    /// The data directory and the SQLite file; PostgreSQL is refused with the tools to use.
    fn sqlite(self) -> anyhow::Result<(PathBuf, PathBuf)> {
        let overrides = Overrides {
            config: self.config,
            data_dir: self.data_dir,
            database_url: self.database_url,
            ..Default::default()
        };
        let config = Config::load(&overrides, std::env::vars())?;
        anyhow::ensure!(
            config.uses_sqlite(),
            "The database is PostgreSQL: back it up with its own tools, `pg_dump -Fc -d DATABASE \
             -f liaison.dump`, and restore with `pg_restore -d NEW_DATABASE liaison.dump` \
             (docs/operators.md, \"Backup and restore\"); keep the master key with the dump."
        );
        let file = crate::store::sqlite_file(&config.database_url)?;
        Ok((config.data_dir, file))
    }
}

/// `liaison backup DEST`.
pub(super) fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let (data_dir, db) = args.location.sqlite()?;
    anyhow::ensure!(
        db.is_file(),
        "No database at {}: is --data-dir (or LIAISON_DATA_DIR) the server's?",
        db.display()
    );
    let dest = &args.dest;
    if dest.exists() {
        let empty = std::fs::read_dir(dest)
            .with_context(|| format!("{} is not a directory", dest.display()))?
            .next()
            .is_none();
        anyhow::ensure!(
            empty,
            "{} is not empty: a backup goes into a new directory",
            dest.display()
        );
    }
    crate::app::create_private_dir(dest)?;
    Store::backup_sqlite_file(&db, &dest.join(SQLITE_FILE))
        .with_context(|| format!("Could not back up {}", db.display()))?;
    let copied = copy_secrets(&data_dir, dest)?;
    say(&format!(
        "Backed up {} to {} (a consistent copy as of now), with {}.",
        db.display(),
        dest.display(),
        if copied.is_empty() {
            "no other file".to_owned()
        } else {
            copied.join(" and ")
        }
    ));
    if std::env::var_os(MASTER_KEY_ENV).is_some() {
        say(&format!(
            "The master key comes from {MASTER_KEY_ENV}, so it is not in the backup: keep it \
             with the backup, or the signing keys in it cannot be opened."
        ));
    } else if !copied.contains(&MASTER_KEY_FILE) {
        say(&format!(
            "Warning: no {MASTER_KEY_FILE} in {} and no {MASTER_KEY_ENV}: the signing keys in this \
             backup can only be opened with the master key the server used.",
            data_dir.display()
        ));
    }
    Ok(())
}

/// `liaison restore SRC`: into a data directory without a database (never over a live one).
pub(super) fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let (data_dir, db) = args.location.sqlite()?;
    let src = &args.src;
    let backup = src.join(SQLITE_FILE);
    anyhow::ensure!(
        backup.is_file(),
        "No {SQLITE_FILE} in {}: not a directory `liaison backup` wrote",
        src.display()
    );
    anyhow::ensure!(
        !db.exists(),
        "{} exists: restore into a new data directory (--data-dir), or stop the server and move \
         the old one aside first",
        db.display()
    );
    for name in SECRET_FILES {
        let (from, to) = (src.join(name), data_dir.join(name));
        if from.is_file() && to.exists() {
            let same = std::fs::read(&from)? == std::fs::read(&to)?;
            anyhow::ensure!(
                same,
                "{} exists and differs from the backup's: restore into a new data directory",
                to.display()
            );
        }
    }
    crate::app::create_private_dir(&data_dir)?;
    if let Some(parent) = db.parent() {
        crate::app::create_private_dir(parent)?;
    }
    // The same online backup API, from the backup into place: the copy is checked on the way.
    Store::backup_sqlite_file(&backup, &db)
        .with_context(|| format!("Could not restore {}", backup.display()))?;
    let copied = copy_secrets(src, &data_dir)?;
    say(&format!(
        "Restored {} to {}{}. Start the server with this data directory (and the same \
         {MASTER_KEY_ENV}, if the server had one).",
        backup.display(),
        db.display(),
        if copied.is_empty() {
            String::new()
        } else {
            format!(", with {}", copied.join(" and "))
        }
    ));
    Ok(())
}

/// Copies the files of [`SECRET_FILES`] that `from` has into `to` (mode 0600; one identical
/// already there is left), and names those copied.
fn copy_secrets(from: &Path, to: &Path) -> anyhow::Result<Vec<&'static str>> {
    let mut copied = Vec::new();
    for name in SECRET_FILES {
        let source = from.join(name);
        let text = match std::fs::read_to_string(&source) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("Could not read {}", source.display()));
            }
        };
        let target = to.join(name);
        if !target.exists() {
            crate::app::write_secret_file(&target, text.trim())?;
        }
        copied.push(name);
    }
    Ok(copied)
}
