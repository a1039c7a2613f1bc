//! The PostgreSQL backend (`--home postgres://…`): many nodes share one record.
//!
//! - Events are rows numbered per conversation; the primary key refuses a second event N.
//! - One writer per conversation across every node: a session advisory lock, taken on the
//!   writer's own pooled connection and released when the store is dropped (or, if the node
//!   dies, when PostgreSQL sees its connection close). It waits as long as the file lock does.
//! - A unit of writes (`begin` … `commit`) is held in memory and committed in one transaction:
//!   a node killed in the middle of a compaction leaves none of it.
//! - Archives and artifacts are bytes with their size and SHA-256, checked on every read.
//!
//! Client: `postgres` (the blocking face of tokio-postgres) with an `r2d2` pool, because every
//! storage call is blocking code already (the lifecycle runs on tokio's blocking pool); the
//! async client would need a runtime handle threaded through every caller for no gain.
//!
//! Round trips: every statement is prepared once per pooled connection with its parameters'
//! types named (`connection`), then only bound and executed: one round trip each, no parse. A
//! writer's open (create the conversation, take its lock) is one statement; a unit's events, and
//! an archive's artifacts, are one statement each (arrays through `unnest`).

mod connection;
mod migrations;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use postgres::error::SqlState;
use postgres::types::Type;
use sha2::{Digest, Sha256};

use connection::Manager;

use super::backend::{writer_timed_out, ArchiveEntries, ArchiveReader, Backend, Conversation, DocumentChange, DocumentName, Parsed, WRITER_WAIT};
use super::location::{for_client, shown};
use super::stored_token::StoredToken;
use super::tokens::TokenScope;
use super::{ArchiveId, ConversationKey, Tenant};
use crate::record::{Event, Notice};
use crate::transcript::Artifact;

type Pool = r2d2::Pool<Manager>;
type Connection = r2d2::PooledConnection<Manager>;

/// Connections per node (`CAIRN_POSTGRES_POOL`): a writer holds one for its whole call.
const DEFAULT_POOL: u32 = 16;
const POLL: Duration = Duration::from_millis(10);

/// One pool per database per process: a policy reload opens the home again.
static POOLS: LazyLock<Mutex<HashMap<String, Pool>>> = LazyLock::new(Default::default);

pub struct Postgres {
    pool: Pool,
    location: String,
}

impl Postgres {
    /// Connects (checking the server answers) and migrates the schema.
    pub fn open(url: &str) -> Result<Self> {
        let location = shown(Path::new(url));
        let mut pools = POOLS.lock().map_err(|_| anyhow::anyhow!("the pool registry is poisoned"))?;
        if let Some(pool) = pools.get(url) {
            return Ok(Postgres { pool: pool.clone(), location });
        }
        // The client's own parse error is not shown: it may quote the URL.
        let config: postgres::Config = for_client(url).parse().map_err(|_| anyhow::anyhow!("{location}: not a PostgreSQL URL"))?;
        let size = std::env::var("CAIRN_POSTGRES_POOL").ok().and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_POOL);
        // One connection of its own first: an unreachable server is an error at once, naming it.
        let mut client = config.connect(postgres::NoTls).with_context(|| format!("cannot reach PostgreSQL at {location}"))?;
        migrations::apply(&mut client).with_context(|| format!("migrating the schema of {location}"))?;
        let pool = r2d2::Pool::builder().max_size(size).min_idle(Some(1)).connection_timeout(Duration::from_secs(30)).error_handler(Box::new(r2d2::NopErrorHandler)).build_unchecked(Manager(config));
        pools.insert(url.to_string(), pool.clone());
        Ok(Postgres { pool, location })
    }

    fn client(&self) -> Result<Connection> {
        self.pool.get().with_context(|| format!("no connection to {}", self.location))
    }
}

/// The advisory lock naming one conversation: 64 bits of a hash of tenant and key.
fn lock_id(tenant: &Tenant, key: &ConversationKey) -> i64 {
    let digest = Sha256::digest(format!("cairn-conversation\0{tenant}\0{key}"));
    i64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

impl Backend for Postgres {
    fn location(&self) -> &str {
        &self.location
    }

    fn open(&self, tenant: &Tenant, key: &ConversationKey, writer: bool) -> Result<Box<dyn Conversation>> {
        let shown = format!("{}#{tenant}/{key}", self.location);
        let (t, k) = (tenant.as_str(), key.as_str());
        let mut client = self.client()?;
        let writer = if writer {
            let id = lock_id(tenant, key);
            let started = Instant::now();
            // Created if new and locked, in one statement (a retry creates nothing).
            const CREATE_AND_LOCK: &str = "WITH created AS (INSERT INTO cairn_conversations (tenant, key) VALUES ($1, $2) ON CONFLICT DO NOTHING) SELECT pg_try_advisory_lock($3)";
            while !client.query_one(CREATE_AND_LOCK, &[(&t, Type::TEXT), (&k, Type::TEXT), (&id, Type::INT8)]).with_context(|| format!("creating and locking {shown}"))?.get::<_, bool>(0) {
                if started.elapsed() >= WRITER_WAIT {
                    return Err(writer_timed_out()).with_context(|| format!("locking {shown}"));
                }
                std::thread::sleep(POLL);
            }
            Some(client)
        } else {
            if client.query_opt("SELECT 1 FROM cairn_conversations WHERE tenant = $1 AND key = $2", &[(&t, Type::TEXT), (&k, Type::TEXT)])?.is_none() {
                return Err(crate::error_kinds::NotFound(format!("no conversation {key} in {}", self.location)).into());
            }
            None
        };
        Ok(Box::new(PgConversation { pool: self.pool.clone(), tenant: t.to_string(), key: k.to_string(), shown, writer, events: 0, unit: None, loaded: None }))
    }

    fn conversations(&self, tenant: &Tenant) -> Result<Vec<ConversationKey>> {
        let rows = self.client()?.query("SELECT key FROM cairn_conversations WHERE tenant = $1 ORDER BY key", &[(&tenant.as_str(), Type::TEXT)])?;
        Ok(rows.iter().filter_map(|row| ConversationKey::parse(row.get(0)).ok()).collect())
    }

    fn archive_holders(&self, tenant: &Tenant, archive: &ArchiveId) -> Result<Option<Vec<ConversationKey>>> {
        let rows = self.client()?.query("SELECT key FROM cairn_archives WHERE tenant = $1 AND archive_id = $2", &[(&tenant.as_str(), Type::TEXT), (&archive.as_str(), Type::TEXT)])?;
        Ok(Some(rows.iter().filter_map(|row| ConversationKey::parse(row.get(0)).ok()).collect()))
    }

    fn tokens(&self) -> Result<Vec<StoredToken>> {
        let rows = self.client()?.query("SELECT id, tenant, name, sha256, created_at, revoked, scope FROM cairn_tokens ORDER BY created_at, id", &[])?;
        Ok(rows.iter().map(token).collect())
    }

    fn token(&self, sha256: &str) -> Result<Option<StoredToken>> {
        // Every authenticated HTTP request: one round trip.
        let row = self.client()?.query_opt("SELECT id, tenant, name, sha256, created_at, revoked, scope FROM cairn_tokens WHERE sha256 = $1", &[(&sha256, Type::TEXT)])?;
        Ok(row.as_ref().map(token))
    }

    fn add_token(&self, t: &StoredToken) -> Result<()> {
        self.client()?.execute(
            "INSERT INTO cairn_tokens (id, tenant, name, sha256, created_at, revoked, scope) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                (&t.id, Type::TEXT),
                (&t.tenant, Type::TEXT),
                (&t.name, Type::TEXT),
                (&t.sha256, Type::TEXT),
                (&(t.created_at as i64), Type::INT8),
                (&t.revoked, Type::BOOL),
                (&t.scope.as_str(), Type::TEXT),
            ],
        )?;
        Ok(())
    }

    fn revoke_token(&self, id: &str) -> Result<bool> {
        Ok(self.client()?.execute("UPDATE cairn_tokens SET revoked = true WHERE id = $1", &[(&id, Type::TEXT)])? > 0)
    }

    fn document(&self, name: &DocumentName) -> Result<Option<Vec<u8>>> {
        let row =
            self.client()?.query_opt("SELECT body FROM cairn_documents WHERE name = $1", &[(&name.as_str(), Type::TEXT)]).with_context(|| format!("reading {}#{}", self.location, name.as_str()))?;
        Ok(row.map(|row| row.get(0)))
    }

    fn update_document(&self, name: &DocumentName, change: &mut DocumentChange<'_>) -> Result<()> {
        let shown = format!("{}#{}", self.location, name.as_str());
        let mut client = self.client()?;
        let mut tx = client.transaction()?;
        // One changer at a time, even while the row does not exist yet (FOR UPDATE locks none).
        let lock = i64::from_le_bytes(Sha256::digest(format!("cairn-document\0{}", name.as_str()))[..8].try_into().expect("8 bytes"));
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[(&lock, Type::INT8)]).with_context(|| format!("locking {shown}"))?;
        let current: Option<Vec<u8>> = tx.query_opt("SELECT body FROM cairn_documents WHERE name = $1", &[(&name.as_str(), Type::TEXT)])?.map(|row| row.get(0));
        if let Some(bytes) = change(current.as_deref())? {
            tx.execute("INSERT INTO cairn_documents (name, body) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET body = excluded.body", &[(&name.as_str(), Type::TEXT), (&bytes, Type::BYTEA)])
                .with_context(|| format!("replacing {shown}"))?;
        }
        tx.commit().with_context(|| format!("replacing {shown}"))
    }
}

fn token(row: &postgres::Row) -> StoredToken {
    StoredToken { id: row.get(0), tenant: row.get(1), name: row.get(2), sha256: row.get(3), created_at: row.get::<_, i64>(4) as u64, revoked: row.get(5), scope: scope(row.get(6)) }
}

/// The column's CHECK allows only the known scopes; anything else would get the least access.
fn scope(text: &str) -> TokenScope {
    TokenScope::parse(text).unwrap_or(TokenScope::Tenant)
}

/// A conversation's logs as parsed, kept for the life of the process: rows are never changed
/// once written, so a later load reads only the events appended since.
type KeptLog = (Arc<Parsed>, i64);
static KEPT: LazyLock<Mutex<HashMap<String, KeptLog>>> = LazyLock::new(Default::default);
const KEPT_LOGS: usize = 256;

enum Write {
    Event { seq: i64, body: String },
    Archive { id: String, entries: Vec<u8>, artifacts: Vec<Artifact> },
    State(Vec<u8>),
    Notice(Notice),
    Ack(String),
}

struct PgConversation {
    pool: Pool,
    tenant: String,
    key: String,
    /// `URL#tenant/key`, for messages.
    shown: String,
    /// A writer's own connection, holding the conversation's advisory lock.
    writer: Option<Connection>,
    /// Events in the log (counting kinds this version skips): the next is `events + 1`.
    events: i64,
    /// Writes held for one transaction, between `begin` and `commit`.
    unit: Option<Vec<Write>>,
    /// How many events the last load read (counting kinds this version skips), for `keep`.
    loaded: Option<i64>,
}

impl Drop for PgConversation {
    fn drop(&mut self) {
        if let Some(client) = self.writer.as_mut() {
            // The connection goes back to the pool: it must hold no lock of ours.
            if let Err(e) = client.batch_execute("SELECT pg_advisory_unlock_all()") {
                tracing::warn!(conversation = %self.shown, "releasing the writer's lock: {e}");
            }
        }
    }
}

impl PgConversation {
    fn reader(&self) -> Result<Connection> {
        self.pool.get().with_context(|| format!("no connection for {}", self.shown))
    }

    /// Runs writes in one transaction on the writer's connection; returns how many notices
    /// were new.
    fn apply(&mut self, writes: &[Write]) -> Result<u64> {
        let (t, k) = (self.tenant.as_str(), self.key.as_str());
        let shown = &self.shown;
        let client = self.writer.as_mut().expect("only a writer writes");
        let mut tx = client.transaction()?;
        let mut new_notices = 0;
        let mut writes = writes.iter().peekable();
        while let Some(write) = writes.next() {
            match write {
                Write::Event { seq, body } => {
                    // A run of events is one statement: one round trip and one parse, not one each.
                    let (mut seqs, mut bodies) = (vec![*seq], vec![body.as_str()]);
                    while let Some(Write::Event { seq, body }) = writes.peek() {
                        seqs.push(*seq);
                        bodies.push(body.as_str());
                        writes.next();
                    }
                    let inserted = tx.execute(
                        "INSERT INTO cairn_events (tenant, key, seq, body) SELECT $1, $2, seq, body FROM unnest($3::bigint[], $4::text[]) AS e(seq, body)",
                        &[(&t, Type::TEXT), (&k, Type::TEXT), (&seqs, Type::INT8_ARRAY), (&bodies, Type::TEXT_ARRAY)],
                    );
                    if let Err(e) = inserted {
                        let shown_seqs = match seqs.as_slice() {
                            [one] => format!("event {one}"),
                            [first, .., last] => format!("events {first}–{last}"),
                            [] => unreachable!("a run holds its first event"),
                        };
                        if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                            bail!("{shown}: {shown_seqs}: appended by another writer");
                        }
                        return Err(e).with_context(|| format!("{shown}: appending {shown_seqs}"));
                    }
                }
                Write::Archive { id, entries, artifacts } => {
                    // A retried attempt (a resumed handover) writes its archive again.
                    tx.execute("DELETE FROM cairn_archives WHERE tenant = $1 AND key = $2 AND archive_id = $3", &[(&t, Type::TEXT), (&k, Type::TEXT), (id, Type::TEXT)])?;
                    let (len, sha256) = (entries.len() as i64, Sha256::digest(entries));
                    tx.execute(
                        "INSERT INTO cairn_archives (tenant, key, archive_id, entries, entries_len, entries_sha256) VALUES ($1, $2, $3, $4, $5, $6)",
                        &[(&t, Type::TEXT), (&k, Type::TEXT), (id, Type::TEXT), (entries, Type::BYTEA), (&len, Type::INT8), (&sha256.as_slice(), Type::BYTEA)],
                    )?;
                    if !artifacts.is_empty() {
                        // Every artifact in one statement: a compaction sets aside dozens.
                        let contents: Vec<&[u8]> = artifacts.iter().map(|a| a.as_bytes()).collect();
                        let lens: Vec<i64> = contents.iter().map(|c| c.len() as i64).collect();
                        let hashes: Vec<Vec<u8>> = contents.iter().map(|c| Sha256::digest(c).to_vec()).collect();
                        tx.execute(
                            "INSERT INTO cairn_artifacts (tenant, key, archive_id, idx, content, len, sha256) \
                             SELECT $1, $2, $3, idx::integer, content, len, sha256 FROM unnest($4::bytea[], $5::bigint[], $6::bytea[]) WITH ORDINALITY AS a(content, len, sha256, idx)",
                            &[(&t, Type::TEXT), (&k, Type::TEXT), (id, Type::TEXT), (&contents, Type::BYTEA_ARRAY), (&lens, Type::INT8_ARRAY), (&hashes, Type::BYTEA_ARRAY)],
                        )?;
                    }
                }
                Write::State(state) => {
                    tx.execute("UPDATE cairn_conversations SET state = $3 WHERE tenant = $1 AND key = $2", &[(&t, Type::TEXT), (&k, Type::TEXT), (state, Type::BYTEA)])?;
                }
                Write::Notice(notice) => {
                    let body = serde_json::to_string(notice)?;
                    new_notices += tx.execute(
                        "INSERT INTO cairn_notices (tenant, key, id, body) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                        &[(&t, Type::TEXT), (&k, Type::TEXT), (&notice.id, Type::TEXT), (&body, Type::TEXT)],
                    )?;
                }
                Write::Ack(id) => {
                    tx.execute("UPDATE cairn_notices SET acked = true WHERE tenant = $1 AND key = $2 AND id = $3", &[(&t, Type::TEXT), (&k, Type::TEXT), (id, Type::TEXT)])?;
                }
            }
        }
        tx.commit().with_context(|| format!("committing to {shown}"))?;
        Ok(new_notices)
    }

    /// Now, or at the unit's commit.
    fn write(&mut self, write: Write) -> Result<()> {
        match self.unit.as_mut() {
            Some(unit) => {
                unit.push(write);
                Ok(())
            }
            None => self.apply(&[write]).map(drop),
        }
    }
}

impl Conversation for PgConversation {
    fn load(&mut self) -> Result<Arc<Parsed>> {
        // Taken out while the events since are added to it, so it is extended in place: a
        // reader's goes back at once, a writer's when its store gives it back (`keep`).
        let cache = self.shown.clone();
        let kept = KEPT.lock().ok().and_then(|mut kept| kept.remove(&cache));
        let (mut parsed, mut events) = kept.unwrap_or_default();
        let rows = self
            .reader()?
            .query("SELECT seq, body FROM cairn_events WHERE tenant = $1 AND key = $2 AND seq > $3 ORDER BY seq", &[(&self.tenant, Type::TEXT), (&self.key, Type::TEXT), (&events, Type::INT8)])?;
        for row in rows {
            let seq: i64 = row.get(0);
            if seq != events + 1 {
                bail!("{}: corrupt event log (event {} is missing)", self.shown, events + 1);
            }
            events = seq;
            match serde_json::from_str::<Event>(row.get(1)) {
                Ok(Event::Unknown) => tracing::debug!(conversation = %self.shown, seq, "skipping an event of a kind this version does not know"),
                Ok(event) => Arc::make_mut(&mut parsed).push(event),
                Err(e) => bail!("{}: event {seq}: corrupt event log row (not a Cairn event: {e})", self.shown),
            }
        }
        self.events = events;
        self.loaded = Some(events);
        if self.writer.is_none() {
            let loaded = parsed.events.len();
            self.keep(parsed.clone(), loaded);
        }
        Ok(parsed)
    }

    /// Only as loaded: a writer's appends are taken out again (they may be in a transaction
    /// that never committed), so the next load reads them back.
    fn keep(&mut self, mut log: Arc<Parsed>, loaded: usize) {
        let Some(events) = self.loaded.take() else { return };
        if log.events.len() > loaded {
            let Some(parsed) = Arc::get_mut(&mut log) else { return };
            parsed.truncate(loaded);
        }
        if let Ok(mut kept) = KEPT.lock() {
            if kept.len() >= KEPT_LOGS {
                kept.clear();
            }
            kept.insert(self.shown.clone(), (log, events));
        }
    }

    fn append(&mut self, event: &Event) -> Result<()> {
        let seq = self.events + 1;
        self.write(Write::Event { seq, body: serde_json::to_string(event)? })?;
        self.events = seq;
        Ok(())
    }

    fn write_archive(&mut self, id: &ArchiveId, entries: &ArchiveEntries<'_>, artifacts: &[Artifact]) -> Result<()> {
        self.write(Write::Archive { id: id.to_string(), entries: entries.to_vec()?, artifacts: artifacts.to_vec() })
    }

    fn archives(&self) -> Result<Arc<dyn ArchiveReader>> {
        Ok(Arc::new(PgArchives { pool: self.pool.clone(), tenant: self.tenant.clone(), key: self.key.clone() }))
    }

    fn load_state(&self) -> Result<Option<Vec<u8>>> {
        let row = self.reader()?.query_opt("SELECT state FROM cairn_conversations WHERE tenant = $1 AND key = $2", &[(&self.tenant, Type::TEXT), (&self.key, Type::TEXT)])?;
        Ok(row.and_then(|row| row.get::<_, Option<Vec<u8>>>(0)))
    }

    fn save_state(&mut self, state: Vec<u8>) -> Result<()> {
        self.write(Write::State(state))
    }

    fn notices(&self) -> Result<Vec<(Notice, bool)>> {
        let rows = self.reader()?.query("SELECT body, acked, id FROM cairn_notices WHERE tenant = $1 AND key = $2 ORDER BY queued", &[(&self.tenant, Type::TEXT), (&self.key, Type::TEXT)])?;
        rows.iter()
            .map(|row| {
                let notice = serde_json::from_str(row.get(0)).with_context(|| format!("{}: notice {:?} is not a notice", self.shown, row.get::<_, String>(2)))?;
                Ok((notice, row.get(1)))
            })
            .collect()
    }

    fn queue_notice(&mut self, notice: &Notice) -> Result<bool> {
        let write = Write::Notice(notice.clone());
        match self.unit.as_mut() {
            Some(unit) => {
                unit.push(write);
                Ok(true)
            }
            None => Ok(self.apply(&[write])? > 0),
        }
    }

    fn ack_notice(&mut self, id: &str) -> Result<bool> {
        let exists =
            self.reader()?.query_opt("SELECT 1 FROM cairn_notices WHERE tenant = $1 AND key = $2 AND id = $3", &[(&self.tenant, Type::TEXT), (&self.key, Type::TEXT), (&id, Type::TEXT)])?.is_some();
        if exists {
            self.write(Write::Ack(id.to_string()))?;
        }
        Ok(exists)
    }

    fn begin(&mut self) {
        self.unit.get_or_insert_with(Vec::new);
    }

    fn commit(&mut self) -> Result<()> {
        match self.unit.take() {
            Some(writes) if !writes.is_empty() => self.apply(&writes).map(drop),
            _ => Ok(()),
        }
    }
}

struct PgArchives {
    pool: Pool,
    tenant: String,
    key: String,
}

impl PgArchives {
    fn checked(archive: &ArchiveId, what: &str, bytes: Vec<u8>, len: i64, sha256: &[u8]) -> std::io::Result<Vec<u8>> {
        if bytes.len() as i64 != len || Sha256::digest(&bytes).as_slice() != sha256 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("archive {archive}: {what} does not match its recorded size and hash ({} bytes read, {len} recorded)", bytes.len()),
            ));
        }
        Ok(bytes)
    }

    fn query(&self, sql: &'static str, params: &connection::Params<'_>) -> std::io::Result<Option<postgres::Row>> {
        let io = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
        let mut client = self.pool.get().map_err(|e| io(&e))?;
        client.query_opt(sql, params).map_err(|e| io(&e))
    }
}

impl ArchiveReader for PgArchives {
    fn entries(&self, id: &ArchiveId) -> std::io::Result<Option<Vec<u8>>> {
        let row = self.query(
            "SELECT entries, entries_len, entries_sha256 FROM cairn_archives WHERE tenant = $1 AND key = $2 AND archive_id = $3",
            &[(&self.tenant, Type::TEXT), (&self.key, Type::TEXT), (&id.as_str(), Type::TEXT)],
        )?;
        let row = row.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("archive {id} is missing")))?;
        Self::checked(id, "its entries", row.get(0), row.get(1), row.get(2)).map(Some)
    }

    fn artifact(&self, id: &ArchiveId, index: u32) -> std::io::Result<Vec<u8>> {
        let row = self.query(
            "SELECT content, len, sha256 FROM cairn_artifacts WHERE tenant = $1 AND key = $2 AND archive_id = $3 AND idx = $4",
            &[(&self.tenant, Type::TEXT), (&self.key, Type::TEXT), (&id.as_str(), Type::TEXT), (&(index as i32), Type::INT4)],
        )?;
        let row = row.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("archive {id} has no artifact {index}")))?;
        Self::checked(id, &format!("artifact {index}"), row.get(0), row.get(1), row.get(2))
    }
}
