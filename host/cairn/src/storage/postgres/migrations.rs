//! Versioned schema migrations, applied in order on start. Nodes starting together take one
//! transaction-scoped advisory lock, so each migration runs once.

use anyhow::{bail, Context, Result};

/// Version, SQL. Append only: a released migration never changes.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/0001_initial.sql")),
    (2, include_str!("migrations/0002_documents.sql")),
    (3, include_str!("migrations/0003_token_scope.sql")),
    (4, include_str!("migrations/0004_lz4.sql")),
];

/// An arbitrary constant naming "Cairn's migrations" among the database's advisory locks.
const MIGRATION_LOCK: i64 = 0x6361_6972_6e5f_6d67;

pub fn apply(client: &mut postgres::Client) -> Result<()> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS cairn_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")?;
    let applied: i32 = tx.query_one("SELECT coalesce(max(version), 0) FROM cairn_migrations", &[])?.get(0);
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if applied > known {
        bail!("the database's schema is version {applied}, newer than this Cairn knows ({known}): upgrade Cairn");
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > applied) {
        tx.batch_execute(sql).with_context(|| format!("applying migration {version}"))?;
        tx.execute("INSERT INTO cairn_migrations (version) VALUES ($1)", &[version])?;
        tracing::info!(version, "applied a schema migration");
    }
    tx.commit()?;
    Ok(())
}
