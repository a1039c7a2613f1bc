//! What a single plugin call's `Store` holds: its memory cap, one state per capability (each
//! with its own grant check), and a deny-all WASI context for components that import WASI.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::Resource;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use crate::capabilities::archive::Originals;
use crate::capabilities::conversation::LentHistory;
use crate::capabilities::{ArchiveCapability, Gate, Grants, LogCapability, ModelCapability, Refusal, TokensCapability};
use crate::model::ModelProvider;
use crate::storage::ArchiveView;
use crate::tokenizer::Tokenizer;

/// Guest output captured from WASI stdout/stderr is kept up to this many bytes.
const CAPTURED_OUTPUT_BYTES: usize = 64 * 1024;

/// What the host offers one call besides its grants.
pub struct Services {
    pub tokenizer: Tokenizer,
    /// The archive this call's artifacts go into, and the conversation's archive to read.
    pub archive_id: String,
    /// Artifacts already stored under `archive_id` by earlier stages of the run.
    pub artifacts_before: u32,
    pub archive: Option<Arc<ArchiveView>>,
    pub model: Option<Arc<dyn ModelProvider>>,
    /// When the call must be over; host calls (the model) stop by then too.
    pub deadline: Instant,
    /// The parts of the entries the call is given, for sharing the artifacts that are theirs.
    pub originals: Originals,
}

impl Services {
    /// Nothing but the deadline (triggers and commit policies import only `log`).
    pub fn none(deadline: Instant) -> Self {
        Services { tokenizer: Tokenizer::default(), archive_id: String::new(), artifacts_before: 0, archive: None, model: None, deadline, originals: Originals::default() }
    }
}

pub struct CallState {
    /// `name@version`, for logs and errors.
    pub plugin: Arc<str>,
    pub memory: MemoryCap,
    pub log: LogCapability,
    pub tokens: TokensCapability,
    pub model: ModelCapability,
    pub archive: ArchiveCapability,
    /// When the call must be over; host calls that could block stop by then.
    pub deadline: Instant,
    /// What the guest wrote to stderr (a runtime's last words before a trap: a Python
    /// traceback, a Rust panic message), bounded like stdout.
    stderr: MemoryOutputPipe,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl CallState {
    pub fn new(plugin: &str, memory_bytes: usize, grants: &Grants, services: Services) -> Self {
        let plugin: Arc<str> = plugin.into();
        let gate = || Gate::new(plugin.clone(), grants.clone());
        // Deny-all WASI: no preopens, env, args or network; output captured, bounded.
        let stderr = MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES);
        let wasi = WasiCtx::builder().stdout(MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES)).stderr(stderr.clone()).allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false).build();
        CallState {
            memory: MemoryCap::new(memory_bytes),
            log: LogCapability::new(gate()),
            tokens: TokensCapability::new(gate(), services.tokenizer, services.deadline),
            model: ModelCapability::new(gate(), services.model, services.tokenizer, services.deadline),
            archive: ArchiveCapability::new(gate(), services.archive_id, services.artifacts_before, services.archive, services.originals),
            deadline: services.deadline,
            plugin,
            stderr,
            wasi,
            table: ResourceTable::new(),
        }
    }

    /// Lends the conversation to the call (contract 0.2.0): the handle the guest borrows.
    pub fn lend(&mut self, history: LentHistory) -> wasmtime::Result<Resource<LentHistory>> {
        Ok(self.table.push(history)?)
    }

    pub fn lent(&self, history: &Resource<LentHistory>) -> wasmtime::Result<&LentHistory> {
        Ok(self.table.get(history)?)
    }

    /// The lent conversation and the archive its parts are set aside in.
    pub fn lent_with_archive(&mut self, history: &Resource<LentHistory>) -> wasmtime::Result<(&LentHistory, &mut ArchiveCapability)> {
        Ok((self.table.get(history)?, &mut self.archive))
    }

    pub fn give_back(&mut self, history: Resource<LentHistory>) -> wasmtime::Result<()> {
        self.table.delete(history)?;
        Ok(())
    }

    /// The last few lines the guest wrote to stderr, if any.
    pub fn stderr_tail(&self) -> Option<String> {
        last_lines(&String::from_utf8_lossy(&self.stderr.contents()))
    }

    /// Every capability call refused during this call, in capability order.
    pub fn refusals(&self) -> Vec<Refusal> {
        [self.log.gate(), self.tokens.gate(), self.model.gate(), self.archive.gate()].into_iter().flat_map(|g| g.refused().iter().cloned()).collect()
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// The last four non-blank lines of `text`, at most their last 1,000 characters: the end matters
/// most (a panic's location, an exception's own line), so a longer tail loses its start.
fn last_lines(text: &str) -> Option<String> {
    const LINES: usize = 4;
    const MAX_CHARS: usize = 1_000;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(LINES)..].join("\n");
    match tail.char_indices().rev().nth(MAX_CHARS - 1).map_or(0, |(at, _)| at) {
        _ if tail.is_empty() => None,
        0 => Some(tail),
        start => Some(format!("…{}", &tail[start..])),
    }
}

/// Caps the memory of a whole call — every linear memory and table of every instance in the
/// component, together — and remembers whether the cap was hit, so the failure is reported
/// as `oom` rather than a generic trap.
pub struct MemoryCap {
    pub max_bytes: usize,
    pub exceeded: bool,
    /// Bytes of linear memory and table elements (counted at 8 bytes each) in use.
    used: usize,
}

/// Tables may hold at most this many elements each.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;
/// A component built by a normal toolchain has one or two memories (an adapter may add one)
/// and a few tables; a plugin may have at most these.
pub const MAX_MEMORIES: usize = 4;
pub const MAX_TABLES: usize = 16;
pub const MAX_INSTANCES: usize = 32;
const TABLE_ELEMENT_BYTES: usize = 8;

impl MemoryCap {
    pub fn new(max_bytes: usize) -> Self {
        MemoryCap { max_bytes, exceeded: false, used: 0 }
    }

    fn grow(&mut self, current: usize, desired: usize, what: &str) -> wasmtime::Result<bool> {
        let total = self.used.saturating_add(desired.saturating_sub(current));
        if total > self.max_bytes {
            self.exceeded = true;
            wasmtime::bail!("out of memory: growing a {what} would take the call to {total} bytes, its cap is {}", self.max_bytes);
        }
        self.used = total;
        Ok(true)
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.grow(current, desired, "memory")
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.grow(current.saturating_mul(TABLE_ELEMENT_BYTES), desired.saturating_mul(TABLE_ELEMENT_BYTES), "table")
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_guest_wrote_last_survives_the_clip() {
        assert_eq!(last_lines("\n  \n"), None);
        assert_eq!(last_lines("one\n\ntwo\nthree\nfour\nfive\n").as_deref(), Some("two\nthree\nfour\nfive"));
        let long = format!("{}\npanicked at src/lib.rs:12:5: no closing brace\n", "é".repeat(3_000));
        let tail = last_lines(&long).unwrap();
        assert!(tail.starts_with('…') && tail.ends_with("src/lib.rs:12:5: no closing brace"), "{tail}");
        assert_eq!(tail.chars().count(), 1_001, "the clip counts characters, not bytes");
    }

    #[test]
    fn the_cap_covers_every_memory_and_table_of_the_call_together() {
        let mut cap = MemoryCap::new(4 << 20);
        assert!(cap.memory_growing(0, 2 << 20, None).unwrap());
        assert!(cap.memory_growing(2 << 20, 3 << 20, None).unwrap(), "growth counts the difference");
        // A second memory of 2 MiB would take the call past 4 MiB, though it is under on its own.
        assert!(cap.memory_growing(0, 2 << 20, None).is_err());
        assert!(cap.exceeded, "the overrun is reported as oom");

        let mut cap = MemoryCap::new(1 << 20);
        assert!(!cap.table_growing(0, MAX_TABLE_ELEMENTS + 1, None).unwrap());
        assert!(cap.table_growing(0, 1_000, None).unwrap());
        assert!(cap.memory_growing(0, (1 << 20) - 8_000, None).unwrap());
        assert!(cap.memory_growing(0, 64 << 10, None).is_err(), "tables count toward the cap");
        assert_eq!((cap.memories(), cap.tables()), (MAX_MEMORIES, MAX_TABLES));
    }
}
