//! SQLite's way to run a statement: through rusqlite, synchronously, on the calling thread (see
//! [`super`] for why). A call's text is split into its statements at `;` ([`statements`]), its
//! `$n` parameters resolved once per static text ([`Plan`]), and run on the writer's connection or
//! on one of [`LitePool`]'s read connections. It must not depend on any file of the store above
//! [`super`]'s own statement and row types and [`crate::store::error`].

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use rusqlite::types::{ToSqlOutput, Value as LiteValue, ValueRef};

use super::query::{Done, Output, Query, Value, Want};
use super::row::{LiteRow, Row};
use crate::store::error::{Result, StoreError};

impl Query {
    /// Runs every statement of the call on `conn`, binding each `$n` (or `?n`) to the n-th value.
    pub(super) fn run_lite(&self, conn: &rusqlite::Connection, want: Want) -> Result<Output> {
        match &self.sql {
            Cow::Borrowed(sql) => {
                let plan = Plan::kept(conn, sql)?;
                self.run_plan(conn, sql, &plan, want)
            }
            Cow::Owned(sql) => {
                let plan = Plan::kept_built(conn, sql)?;
                self.run_plan(conn, sql, &plan, want)
            }
        }
    }

    fn run_plan(
        &self,
        conn: &rusqlite::Connection,
        sql: &str,
        plan: &Plan,
        want: Want,
    ) -> Result<Output> {
        let mut rows = Vec::new();
        let mut changed = 0u64;
        for Resolved {
            range,
            numbers,
            columns,
        } in &plan.statements
        {
            let mut stmt = conn.prepare_cached(&sql[range.clone()])?;
            for (i, &n) in numbers.iter().enumerate() {
                let value = self.args.get(n.wrapping_sub(1)).ok_or_else(|| {
                    StoreError::Database(format!("no value bound for parameter {n}"))
                })?;
                stmt.raw_bind_parameter(i + 1, ToSqlOutput::Borrowed(value.as_lite()))?;
            }
            let writes = !stmt.readonly();
            if stmt.column_count() == 0 {
                stmt.raw_execute()?;
            } else if want == Want::Nothing {
                // Rows it returns are not wanted, but it runs to its end (e.g. `… RETURNING`).
                let mut found = stmt.raw_query();
                while found.next()?.is_some() {}
            } else {
                let mut found = stmt.raw_query();
                while let Some(row) = found.next()? {
                    let values = (0..columns.len())
                        .map(|i| row.get_ref(i).map(owned))
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    rows.push(Row::Lite(LiteRow {
                        columns: columns.clone(),
                        values,
                    }));
                    if want == Want::First {
                        break;
                    }
                }
            }
            if writes {
                changed += conn.changes();
            }
        }
        Ok(match want {
            Want::Nothing => Output::Done(Done {
                rows_affected: changed,
            }),
            _ => Output::Rows(rows),
        })
    }
}

/// The statements of a call: split at each `;` outside quotes, empty ones left out. Scans bytes:
/// the characters it looks for are ASCII, which no byte of a longer UTF-8 character equals.
fn statements(sql: &str) -> impl Iterator<Item = &str> {
    let bytes = sql.as_bytes();
    let (mut start, mut quote) = (0, None);
    std::iter::from_fn(move || {
        while start <= bytes.len() {
            let mut end = start;
            while end < bytes.len() {
                match (quote, bytes[end]) {
                    (Some(q), b) if b == q => quote = None,
                    (Some(_), _) => {}
                    (None, b @ (b'\'' | b'"')) => quote = Some(b),
                    (None, b';') => break,
                    _ => {}
                }
                end += 1;
            }
            let statement = sql[start..end].trim();
            start = end + 1;
            if !statement.is_empty() {
                return Some(statement);
            }
        }
        None
    })
}

/// A SQLite call resolved: where each statement of its text is, for each of a statement's
/// parameters (SQLite numbers them in order of first use) the `$n` it names, and the names of the
/// columns it returns. Resolving costs a scan of the text, a name lookup per parameter and a
/// string per column; the store's static texts (the post's call, the writer's bookkeeping) are
/// resolved once per thread and kept ([`Plan::kept`]), which saves an intake about 3% of its
/// instructions, and so are the texts built at run time ([`Plan::kept_built`]: the reads whose
/// column list is a constant, `SELECT {THREAD_COLUMNS} …`, several per call of a tool).
struct Plan {
    statements: Vec<Resolved>,
}

/// One statement of a [`Plan`].
struct Resolved {
    range: std::ops::Range<usize>,
    numbers: Vec<usize>,
    /// The names of the columns its rows have, shared by every row it returns.
    columns: Arc<[String]>,
}

/// Most texts built at run time kept per thread: some name as many parameters as they bind rows
/// (one text per count), so the map is emptied when full rather than grown.
const KEPT_BUILT: usize = 256;

impl Plan {
    fn new(conn: &rusqlite::Connection, sql: &str) -> Result<Plan> {
        let mut resolved = Vec::new();
        for statement in statements(sql) {
            let start = statement.as_ptr() as usize - sql.as_ptr() as usize;
            // Debug builds refuse a whole read of a table that grows with history (`scans.rs`).
            #[cfg(debug_assertions)]
            super::scans::check(conn, statement)?;
            let stmt = conn.prepare_cached(statement)?;
            let numbers = (1..=stmt.parameter_count())
                .map(|i| match stmt.parameter_name(i) {
                    Some(name) => name[1..].parse::<usize>().map_err(|_| {
                        StoreError::Database(format!("parameter {name} is not numbered"))
                    }),
                    None => Ok(i),
                })
                .collect::<Result<Vec<_>>>()?;
            let columns = stmt.column_names().into_iter().map(str::to_owned).collect();
            resolved.push(Resolved {
                range: start..start + statement.len(),
                numbers,
                columns,
            });
        }
        Ok(Plan {
            statements: resolved,
        })
    }

    /// The plan of a static text, resolved on this thread's first use of it. The texts are the
    /// program's own, so the plans kept are as many as the store has statements.
    fn kept(conn: &rusqlite::Connection, sql: &'static str) -> Result<std::rc::Rc<Plan>> {
        thread_local! {
            static PLANS: std::cell::RefCell<std::collections::HashMap<(usize, usize), std::rc::Rc<Plan>, TextHash>> =
                Default::default();
        }
        // A static text never moves nor changes: its address and length name it.
        let key = (sql.as_ptr() as usize, sql.len());
        if let Some(plan) = PLANS.with_borrow(|plans| plans.get(&key).cloned()) {
            return Ok(plan);
        }
        let plan = std::rc::Rc::new(Plan::new(conn, sql)?);
        PLANS.with_borrow_mut(|plans| plans.insert(key, plan.clone()));
        Ok(plan)
    }

    /// The plan of a text built at run time, resolved on this thread's first use of the same
    /// text and kept (at most [`KEPT_BUILT`] texts).
    fn kept_built(conn: &rusqlite::Connection, sql: &str) -> Result<std::rc::Rc<Plan>> {
        thread_local! {
            static PLANS: std::cell::RefCell<std::collections::HashMap<Box<str>, std::rc::Rc<Plan>, TextHash>> =
                Default::default();
        }
        if let Some(plan) = PLANS.with_borrow(|plans| plans.get(sql).cloned()) {
            return Ok(plan);
        }
        let plan = std::rc::Rc::new(Plan::new(conn, sql)?);
        PLANS.with_borrow_mut(|plans| {
            if plans.len() >= KEPT_BUILT {
                plans.clear();
            }
            plans.insert(sql.into(), plan.clone());
        });
        Ok(plan)
    }
}

/// The plan caches' hash: FxHash's multiply-rotate over 8 bytes at a time. Their keys are the
/// program's own SQL texts (or their addresses), never a client's, so there is no flooding to
/// resist, and the standard SipHash of a built text cost a delegated task about 20,000
/// instructions (callgrind): several hundred bytes hashed for each of its reads.
type TextHash = std::hash::BuildHasherDefault<TextHasher>;

#[derive(Default)]
struct TextHasher(u64);

impl TextHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for TextHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.add(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn owned(v: ValueRef<'_>) -> LiteValue {
    match v {
        ValueRef::Null => LiteValue::Null,
        ValueRef::Integer(i) => LiteValue::Integer(i),
        ValueRef::Real(f) => LiteValue::Real(f),
        // `from_utf8` checks ASCII a word at a time; the lossy path only for what fails it.
        ValueRef::Text(t) => LiteValue::Text(match std::str::from_utf8(t) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(t).into_owned(),
        }),
        ValueRef::Blob(b) => LiteValue::Blob(b.to_vec()),
    }
}

impl Value {
    fn as_lite(&self) -> ValueRef<'_> {
        match self {
            Value::Int(Some(i)) => ValueRef::Integer(*i),
            Value::Text(Some(s)) => ValueRef::Text(s.as_bytes()),
            Value::Int(None) | Value::Text(None) => ValueRef::Null,
        }
    }
}

/// Read connections to one SQLite file. A read holds a connection only while it runs, on the
/// calling thread, so at most one connection per thread running a read is open at once (the
/// runtime's threads are a fixed few); up to [`LitePool::KEEP`] are kept between reads.
pub(crate) struct LitePool {
    path: PathBuf,
    /// How long a read waits for a lock another process holds (the busy timeout).
    busy: std::time::Duration,
    idle: Mutex<Vec<rusqlite::Connection>>,
    open: AtomicU32,
    closed: AtomicBool,
}

impl LitePool {
    const KEEP: usize = 8;

    /// Opens one connection at once, so a wrong path fails at start-up.
    pub(crate) fn open(path: PathBuf, busy: std::time::Duration) -> Result<LitePool> {
        let pool = LitePool {
            path,
            busy,
            idle: Mutex::new(Vec::new()),
            open: AtomicU32::new(0),
            closed: AtomicBool::new(false),
        };
        let first = pool.connect()?;
        pool.idle().push(first);
        Ok(pool)
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<rusqlite::Connection>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn connect(&self) -> Result<rusqlite::Connection> {
        let conn = connect(&self.path, false, self.busy)?;
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok(conn)
    }

    pub(super) fn with<T>(
        &self,
        read: impl FnOnce(&rusqlite::Connection) -> Result<T>,
    ) -> Result<T> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(StoreError::Database("the store is closed".into()));
        }
        let reused = self.idle().pop();
        let conn = match reused {
            Some(conn) => conn,
            None => self.connect()?,
        };
        let outcome = read(&conn);
        // A statement that failed was reset by rusqlite; the connection stays usable.
        let mut idle = self.idle();
        if idle.len() < Self::KEEP && !self.closed.load(Ordering::Relaxed) {
            idle.push(conn);
        } else {
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
        outcome
    }

    pub(super) fn usage(&self) -> (u32, usize) {
        (self.open.load(Ordering::Relaxed), self.idle().len())
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let closed = self.idle().drain(..).count();
        self.open.fetch_sub(closed as u32, Ordering::Relaxed);
    }
}

/// Opens a connection to the SQLite file at `path` (`create`: create it when missing), with the
/// settings every connection of the store has; a lock another connection holds is waited for at
/// most `busy`, then the call fails (`SQLITE_BUSY`).
pub(crate) fn connect(
    path: &std::path::Path,
    create: bool,
    busy: std::time::Duration,
) -> Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = rusqlite::Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy)?;
    conn.set_prepared_statement_cache_capacity(128);
    // The query planner's stability guarantee: plans never depend on the values bound. Without
    // it SQLite reads a bound `LIMIT $n` while planning and marks the statement to be planned
    // again whenever that parameter is bound anew, so every cached statement with such a limit
    // (the thread's messages, the claimable threads, the inbox page) was parsed and planned on
    // every call: 20% of a delegated task's instructions (docs/performance-round-trip.md). The
    // store runs no ANALYZE, so no plan of it could use a bound value for anything else.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(conn)
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        // SQLITE_CONSTRAINT_UNIQUE and SQLITE_CONSTRAINT_PRIMARYKEY; the message names the columns.
        if let rusqlite::Error::SqliteFailure(failure, message) = &e
            && matches!(failure.extended_code, 2067 | 1555)
        {
            return StoreError::Conflict(message.clone().unwrap_or_else(|| failure.to_string()));
        }
        StoreError::Database(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::db::query;

    fn memory() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL, note TEXT, \
             author TEXT, idempotency_key TEXT); \
             CREATE UNIQUE INDEX t_idempotency_key ON t (author, idempotency_key);",
        )
        .unwrap();
        conn
    }

    fn run(conn: &rusqlite::Connection, q: Query, want: Want) -> Result<Output> {
        q.run_lite(conn, want)
    }

    fn rows(out: Output) -> Vec<Row> {
        match out {
            Output::Rows(rows) => rows,
            Output::Done(_) => panic!("no rows"),
        }
    }

    fn changed(out: Output) -> u64 {
        match out {
            Output::Done(done) => done.rows_affected(),
            Output::Rows(_) => panic!("rows"),
        }
    }

    #[test]
    fn numbered_parameters_bind_by_number_in_any_order_and_reused() {
        let conn = memory();
        let q = query("INSERT INTO t (note, n, id) VALUES ($3 || $1, $2, $1)")
            .bind("a")
            .bind(7i64)
            .bind(Some(String::from("x-")));
        assert_eq!(changed(run(&conn, q, Want::Nothing).unwrap()), 1);
        let found = rows(run(&conn, query("SELECT id, n, note FROM t"), Want::All).unwrap());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].try_get::<String, _>("id").unwrap(), "a");
        assert_eq!(found[0].try_get::<i64, _>(1).unwrap(), 7);
        assert_eq!(found[0].try_get::<String, _>("note").unwrap(), "x-a");
        // A parameter with no value bound is an error, not a NULL.
        let q = query("SELECT $2").bind(1i64);
        assert!(run(&conn, q, Want::First).is_err());
    }

    #[test]
    fn a_static_call_resolved_once_binds_like_the_same_text_built_at_run_time() {
        let conn = memory();
        const SQL: &str = "INSERT INTO t (id, n, note) VALUES ($2, $1, 'a;$9'); \
                           INSERT INTO t (id, n) VALUES ($3, $1)";
        for round in 0..3i64 {
            // The static text's kept plan, then the same text owned, in turns.
            let sql: Cow<'static, str> = if round % 2 == 0 {
                Cow::Borrowed(SQL)
            } else {
                Cow::Owned(SQL.to_owned())
            };
            let q = query(sql)
                .bind(round)
                .bind(format!("x{round}"))
                .bind(format!("y{round}"));
            assert_eq!(changed(run(&conn, q, Want::Nothing).unwrap()), 2);
        }
        let found = rows(
            run(
                &conn,
                query("SELECT id, n, note FROM t ORDER BY id"),
                Want::All,
            )
            .unwrap(),
        );
        let ids: Vec<(String, i64)> = found
            .iter()
            .map(|r| (r.try_get("id").unwrap(), r.try_get("n").unwrap()))
            .collect();
        let expected: Vec<(String, i64)> = ["x0", "x1", "x2", "y0", "y1", "y2"]
            .iter()
            .map(|id| (id.to_string(), id[1..].parse().unwrap()))
            .collect();
        assert_eq!(ids, expected);
        assert_eq!(found[0].try_get::<String, _>("note").unwrap(), "a;$9");
        // A static text that cannot be resolved fails each time, nothing kept.
        for _ in 0..2 {
            assert!(run(&conn, query("SELECT $x"), Want::First).is_err());
        }
    }

    #[test]
    fn a_call_counts_the_rows_every_statement_changed_and_only_those() {
        let conn = memory();
        let q = query(
            "INSERT INTO t (id, n) VALUES ($1, 1); INSERT INTO t (id, n) VALUES ($2, 1); \
             SELECT 1; UPDATE t SET n = n + 1 WHERE id IN ($1, $2, $3)",
        )
        .bind("a")
        .bind("b")
        .bind("missing");
        // Two inserts and two updated rows; the SELECT adds nothing (SQLite would repeat the
        // last count).
        assert_eq!(changed(run(&conn, q, Want::Nothing).unwrap()), 4);
        // A statement returning rows runs to its end when its rows are not wanted.
        let q = query("UPDATE t SET n = n + 10 RETURNING n");
        assert_eq!(changed(run(&conn, q, Want::Nothing).unwrap()), 2);
        let first = rows(run(&conn, query("SELECT n FROM t ORDER BY id"), Want::First).unwrap());
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].try_get::<i64, _>("n").unwrap(), 12);
    }

    #[test]
    fn nulls_types_and_constraints_map_to_the_stores_errors() {
        let conn = memory();
        let insert = |id: &'static str, key: Option<&'static str>| {
            query("INSERT INTO t (id, n, author, idempotency_key) VALUES ($1, 0, 'p', $2)")
                .bind(id)
                .bind(key)
        };
        run(&conn, insert("a", Some("k")), Want::Nothing).unwrap();
        match run(&conn, insert("b", Some("k")), Want::Nothing) {
            Err(StoreError::Conflict(what)) => assert!(what.contains("idempotency"), "{what}"),
            other => panic!("expected a conflict, got {:?}", other.err()),
        }
        assert!(matches!(
            run(&conn, insert("a", None), Want::Nothing),
            Err(StoreError::Conflict(_))
        ));
        let row = rows(run(&conn, query("SELECT note, n, id FROM t"), Want::First).unwrap())
            .pop()
            .unwrap();
        assert_eq!(row.try_get::<Option<String>, _>("note").unwrap(), None);
        assert!(matches!(
            row.try_get::<String, _>("note"),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            row.try_get::<i64, _>("id"),
            Err(StoreError::Corrupt(_))
        ));
        assert!(row.try_get::<i64, _>("absent").is_err());
    }

    /// A cached statement is planned once: binding a new `LIMIT` (or any value) does not send it
    /// back through SQLite's parser on the store's connections.
    #[test]
    fn a_cached_statement_is_not_planned_again_when_its_values_change() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connect(
            &dir.path().join("t.db"),
            true,
            std::time::Duration::from_secs(10),
        )
        .unwrap();
        conn.execute_batch(
            "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL); \
             INSERT INTO t VALUES ('a', 1), ('b', 2), ('c', 3);",
        )
        .unwrap();
        const SQL: &str = "SELECT id FROM t WHERE n > $1 ORDER BY id LIMIT $2";
        for (after, limit, expected) in [(0i64, 1i64, 1usize), (0, 2, 2), (1, 5, 2), (0, 3, 3)] {
            let q = query(SQL).bind(after).bind(limit);
            assert_eq!(rows(run(&conn, q, Want::All).unwrap()).len(), expected);
        }
        let stmt = conn.prepare_cached(SQL).unwrap();
        assert_eq!(
            stmt.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "the statement was planned again"
        );
    }

    /// Texts built at run time are kept per thread up to a bound; past it they are resolved
    /// again, and each still returns its own columns.
    #[test]
    fn more_texts_built_at_run_time_than_are_kept_all_run_with_their_own_columns() {
        let conn = memory();
        for round in 0..2 {
            for i in 0..KEPT_BUILT + 10 {
                let sql = format!("SELECT $1 + {i} AS c{i}");
                let found = rows(run(&conn, query(sql).bind(round), Want::First).unwrap());
                let column = format!("c{i}");
                assert_eq!(
                    found[0].try_get::<i64, _>(column.as_str()).unwrap(),
                    (i as i64) + round
                );
            }
        }
    }

    #[test]
    fn a_call_splits_at_semicolons_outside_quotes() {
        let sql = "INSERT INTO t VALUES ('a;b'); UPDATE t SET x = \"c;\" ;; SELECT 1";
        assert_eq!(
            statements(sql).collect::<Vec<_>>(),
            [
                "INSERT INTO t VALUES ('a;b')",
                "UPDATE t SET x = \"c;\"",
                "SELECT 1"
            ]
        );
        // Characters beyond ASCII, inside quotes and out, never end a statement.
        let sql = "SELECT 'é;ü' AS \"日本;\"; SELECT 'ß' ; SELECT '';";
        assert_eq!(
            statements(sql).collect::<Vec<_>>(),
            ["SELECT 'é;ü' AS \"日本;\"", "SELECT 'ß'", "SELECT ''"]
        );
        for empty in ["", ";", " ; ;; "] {
            assert_eq!(statements(empty).count(), 0, "{empty:?}");
        }
    }
}
