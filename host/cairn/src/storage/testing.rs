//! Scratch PostgreSQL databases for tests. `CAIRN_TEST_POSTGRES` names a server and a role
//! that may create databases (`.ci/run` starts one); each test gets its own database, dropped
//! when the guard goes. Without the variable a test fails under CI and is skipped elsewhere.

use std::sync::atomic::{AtomicU64, Ordering};

pub const ENV: &str = "CAIRN_TEST_POSTGRES";

/// A database that exists while this lives.
pub struct ScratchDatabase {
    admin: String,
    name: String,
    pub url: String,
}

/// The server's URL, if tests may use one. Panics under CI when it is missing: a test that
/// needs PostgreSQL never passes there by skipping.
pub fn server() -> Option<String> {
    match std::env::var(ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("{ENV} is not set: under CI every PostgreSQL test must run (.ci/run sets it)"),
        _ => {
            eprintln!("skipping the PostgreSQL part: {ENV} is not set");
            None
        }
    }
}

impl ScratchDatabase {
    /// A fresh database on the test server, or `None` outside CI without one.
    pub fn create() -> Option<ScratchDatabase> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let admin = server()?;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let name = format!("cairn_test_{}_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed), nanos % 1_000_000_000);
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap_or_else(|e| panic!("connecting to {ENV}: {e}"));
        client.batch_execute(&format!("CREATE DATABASE {name}")).unwrap_or_else(|e| panic!("creating a scratch database: {e}"));
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("{ENV} must end with /DATABASE"),
        };
        Some(ScratchDatabase { admin, name, url })
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}
