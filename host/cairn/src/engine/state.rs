//! What a single plugin call's `Store` holds: its memory cap, one state per capability (each
//! with its own grant check), and a deny-all WASI context for components that import WASI.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

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
    pub archive: Option<Arc<ArchiveView>>,
    pub model: Option<Arc<dyn ModelProvider>>,
    /// When the call must be over; host calls (the model) stop by then too.
    pub deadline: Instant,
}

impl Services {
    /// Nothing but the deadline (triggers and commit policies import only `log`).
    pub fn none(deadline: Instant) -> Self {
        Services { tokenizer: Tokenizer::default(), archive_id: String::new(), archive: None, model: None, deadline }
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
    wasi: WasiCtx,
    table: ResourceTable,
}

impl CallState {
    pub fn new(plugin: &str, memory_bytes: usize, grants: &Grants, services: Services) -> Self {
        let plugin: Arc<str> = plugin.into();
        let gate = || Gate::new(plugin.clone(), grants.clone());
        // Deny-all WASI: no preopens, env, args or network; output captured, bounded.
        let wasi = WasiCtx::builder()
            .stdout(MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES))
            .stderr(MemoryOutputPipe::new(CAPTURED_OUTPUT_BYTES))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        CallState {
            memory: MemoryCap { max_bytes: memory_bytes, exceeded: false },
            log: LogCapability::new(gate()),
            tokens: TokensCapability::new(gate(), services.tokenizer, services.deadline),
            model: ModelCapability::new(gate(), services.model, services.deadline),
            archive: ArchiveCapability::new(gate(), services.archive_id, services.archive),
            deadline: services.deadline,
            plugin,
            wasi,
            table: ResourceTable::new(),
        }
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

/// Caps linear memory per call and remembers whether the cap was hit, so the failure is
/// reported as `oom` rather than a generic trap.
pub struct MemoryCap {
    pub max_bytes: usize,
    pub exceeded: bool,
}

/// Tables may hold at most this many elements.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.exceeded = true;
            wasmtime::bail!("out of memory: the plugin asked for {desired} bytes, its cap is {}", self.max_bytes);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_past_the_cap_is_refused_and_remembered_and_tables_are_capped() {
        let mut cap = MemoryCap { max_bytes: 1 << 20, exceeded: false };
        assert!(cap.memory_growing(0, 1 << 20, None).unwrap());
        assert!(cap.memory_growing(0, (1 << 20) + 1, None).is_err());
        assert!(cap.exceeded, "the overrun is reported as oom");
        assert!(cap.table_growing(0, MAX_TABLE_ELEMENTS, None).unwrap());
        assert!(!cap.table_growing(0, MAX_TABLE_ELEMENTS + 1, None).unwrap());
    }
}
