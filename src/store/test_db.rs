//! A database for one unit test, on the backend the suite runs on: a temporary SQLite file, or,
//! when `LIAISON_TEST_DATABASE_URL` names a PostgreSQL server, a fresh database there that is
//! dropped when the test ends. The same choice as the integration suite's `tests/api/helpers.rs`,
//! so that `LIAISON_TEST_DATABASE_URL=postgres://… cargo test --lib` runs the store's unit tests on
//! PostgreSQL too.

pub(crate) struct TestDb {
    pub(crate) url: String,
    _dir: Option<tempfile::TempDir>,
    /// The server's admin URL and the database's name, to drop it.
    pg: Option<(String, String)>,
}

impl TestDb {
    pub(crate) async fn new() -> TestDb {
        // What crate::net::tls::install_crypto_provider does (the store sits below net).
        let _ = rustls::crypto::ring::default_provider().install_default();
        match std::env::var("LIAISON_TEST_DATABASE_URL") {
            Ok(admin_url) if admin_url.starts_with("postgres") => {
                let name = format!("liaison_unit_{}", uuid::Uuid::now_v7().simple());
                sqlx::any::install_default_drivers();
                let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin_url)
                    .await
                    .expect("connect to PostgreSQL");
                sqlx::Executor::execute(
                    &mut conn,
                    sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")),
                )
                .await
                .expect("create a test database");
                let base = admin_url
                    .rsplit_once('/')
                    .map_or(admin_url.as_str(), |(b, _)| b)
                    .to_owned();
                TestDb {
                    url: format!("{base}/{name}"),
                    _dir: None,
                    pg: Some((admin_url, name)),
                }
            }
            _ => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let url = format!("sqlite://{}", dir.path().join("liaison.db").display());
                TestDb {
                    url,
                    _dir: Some(dir),
                    pg: None,
                }
            }
        }
    }

    /// The SQLite file (None on PostgreSQL).
    pub(crate) fn sqlite_path(&self) -> Option<std::path::PathBuf> {
        self._dir.as_ref().map(|d| d.path().join("liaison.db"))
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin_url, name)) = self.pg.take() {
            // No async drop: a short-lived runtime on a plain thread drops the database.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    if let Ok(mut conn) =
                        <sqlx::AnyConnection as sqlx::Connection>::connect(&admin_url).await
                    {
                        let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                        let _ = sqlx::Executor::execute(&mut conn, sqlx::AssertSqlSafe(sql)).await;
                    }
                });
            })
            .join();
        }
    }
}
