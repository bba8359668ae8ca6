//! The embedded migrations (the SQL under `migrations/`, one folder per backend) as sqlx's
//! migrator runs them. Each backend's file ([`super::sqlite`], [`super::postgres`]) lists its own;
//! this must not depend on any other file of the store.

/// The embedded migrations of one backend.
pub(super) fn migrator(
    migrations: &[(i64, &'static str, &'static str)],
) -> sqlx::migrate::Migrator {
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    Migrator::with_migrations(
        migrations
            .iter()
            .map(|(version, name, sql)| {
                Migration::new(
                    *version,
                    (*name).into(),
                    MigrationType::Simple,
                    sqlx::SqlSafeStr::into_sql_str(*sql),
                    false,
                )
            })
            .collect(),
    )
}
