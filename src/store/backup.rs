//! Backup: a consistent copy of a live SQLite database through SQLite's online backup API (what
//! `liaison backup` runs). PostgreSQL has its own tools (`pg_dump`, `pg_restore`). An operation
//! file: nothing else in the store depends on it.

use std::path::Path;
use std::time::Duration;

use rusqlite::OpenFlags;

use super::Store;
use super::error::{Result, StoreError};

impl Store {
    /// Copies the live SQLite database to the new file `dest` with SQLite's online backup API:
    /// a consistent snapshot as of the moment the copy starts (every write committed before it,
    /// none after), taken in one step under a read transaction, which in WAL mode never blocks
    /// the writer. `dest` must not exist; it is created with mode 0600.
    pub fn backup_sqlite_file(source: &Path, dest: &Path) -> Result<()> {
        // A new file of the owner's only (the copy holds every secret the database does); never
        // one that exists.
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        options.open(dest).map_err(|e| {
            StoreError::Database(format!("could not create {}: {e}", dest.display()))
        })?;
        let copied = copy(source, dest);
        if copied.is_err() {
            let _ = std::fs::remove_file(dest);
        }
        copied
    }
}

/// [`Store::backup_sqlite_file`] into the empty file `dest`.
fn copy(source: &Path, dest: &Path) -> Result<()> {
    let from = rusqlite::Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::Database(format!("{}: {e}", source.display())))?;
    from.busy_timeout(Duration::from_secs(10))
        .map_err(|e| StoreError::Database(e.to_string()))?;
    let mut to = rusqlite::Connection::open(dest)
        .map_err(|e| StoreError::Database(format!("{}: {e}", dest.display())))?;
    {
        let backup = rusqlite::backup::Backup::new(&from, &mut to)
            .map_err(|e| StoreError::Database(e.to_string()))?;
        // All pages in one step: the snapshot of one read transaction. Steps of a few pages
        // would restart from the first page whenever the live writer commits, and under a
        // steady write load might never finish.
        loop {
            match backup
                .step(-1)
                .map_err(|e| StoreError::Database(format!("the backup failed: {e}")))?
            {
                rusqlite::backup::StepResult::Done => break,
                // The live writer holds a lock a moment (a checkpoint): try again shortly.
                rusqlite::backup::StepResult::Busy | rusqlite::backup::StepResult::Locked => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                // More pages cannot remain after a step of all pages; step again regardless.
                _ => {}
            }
        }
    }
    let check: String = to
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| StoreError::Database(e.to_string()))?;
    if check != "ok" {
        return Err(StoreError::Corrupt(format!(
            "the copy fails SQLite's check: {check}"
        )));
    }
    // One file, no WAL beside it: a restore copies just this.
    to.execute_batch("PRAGMA journal_mode = DELETE")
        .map_err(|e| StoreError::Database(e.to_string()))?;
    drop(to);
    std::fs::File::open(dest)
        .and_then(|f| f.sync_all())
        .map_err(|e| StoreError::Database(format!("{}: {e}", dest.display())))?;
    Ok(())
}

/// The file of a `sqlite://PATH` (or `sqlite:PATH`) database URL.
pub fn sqlite_file(url: &str) -> Result<std::path::PathBuf> {
    super::sqlite::file_path(url)
}
