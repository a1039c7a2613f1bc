//! What a Wasm file is, before any manifest is trusted: a component or a core module, which
//! Cairn world its exports match, and what it imports. `cairn plugins check` builds its
//! diagnoses on this; loading ([`super::Plugin::load`]) stays the one place that accepts.

use anyhow::Result;
use serde::Serialize;
use wasmtime::component::types::ComponentItem;

use super::hex_sha256;
use crate::capabilities::Interface;
use crate::engine::{Engine, World};

/// The binary's kind, read from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BinaryKind {
    Component,
    /// A core module: it needs turning into a component first.
    CoreModule,
    NotWasm,
}

impl BinaryKind {
    /// From the 8-byte preamble: `\0asm`, then version 1 (core) or the component layer.
    pub fn of(bytes: &[u8]) -> Self {
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => BinaryKind::CoreModule,
            Some([0, b'a', b's', b'm', _, _, 1, 0]) => BinaryKind::Component,
            _ => BinaryKind::NotWasm,
        }
    }
}

/// One import of a component, classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "class", rename_all = "kebab-case")]
pub enum Import {
    Capability {
        name: String,
        interface: &'static str,
    },
    /// `cairn:compaction/types`, the lent `conversation` and the types a world uses: nothing
    /// to grant.
    Types {
        name: String,
    },
    Wasi {
        name: String,
    },
    Other {
        name: String,
    },
}

/// A compiled component's shape.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub sha256: String,
    /// The world its exports implement, if any.
    pub world: Option<World>,
    /// Exported names, with the parameter count of functions.
    pub exports: Vec<String>,
    /// The `cairn:compaction` version its imports name (`0.2.0`), if it imports any.
    pub contract: Option<String>,
    pub imports: Vec<Import>,
}

impl Inspection {
    pub fn capabilities(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.imports.iter().filter_map(|i| match i {
            Import::Capability { interface, .. } => Some(*interface),
            _ => None,
        })
    }

    pub fn wasi(&self) -> impl Iterator<Item = &str> {
        self.imports.iter().filter_map(|i| match i {
            Import::Wasi { name } => Some(name.as_str()),
            _ => None,
        })
    }
}

/// Compiles (or loads from the code cache) and describes a component.
pub fn inspect(engine: &Engine, bytes: &[u8]) -> Result<Inspection> {
    let sha256 = hex_sha256(bytes);
    let (component, _) = engine.component(bytes, &sha256)?;
    let ty = component.component_type();
    let mut exports = Vec::new();
    let mut world = None;
    for (name, item) in ty.exports(engine.wasmtime()) {
        let params = match &item.ty {
            ComponentItem::ComponentFunc(f) => Some(f.params().len()),
            _ => None,
        };
        world = world.or(match (name, params) {
            // `compact(request)` in 0.1.0, `compact(history, request)` in 0.2.0.
            ("compact", Some(1 | 2)) => Some(World::Strategy),
            ("decide", Some(1)) => Some(World::Trigger),
            ("decide", Some(2)) => Some(World::CommitPolicy),
            _ => None,
        });
        exports.push(match params {
            Some(n) => format!("{name}({n} parameter{})", if n == 1 { "" } else { "s" }),
            None => name.to_string(),
        });
    }
    let imports = ty
        .imports(engine.wasmtime())
        .map(|(name, item)| {
            let type_only = matches!(item.ty, ComponentItem::Resource(_) | ComponentItem::Type(_));
            let name = name.to_string();
            if name.starts_with("wasi:") {
                Import::Wasi { name }
            } else if let Some(Ok(interface)) = Interface::from_import(&name) {
                Import::Capability { interface: interface.name(), name }
            } else if name.starts_with("cairn:compaction/types") || name.starts_with("cairn:compaction/conversation") || type_only {
                Import::Types { name }
            } else {
                Import::Other { name }
            }
        })
        .collect();
    let contract = crate::wit_edge::contract_version(engine.wasmtime(), &component).ok().flatten();
    Ok(Inspection { sha256, world, exports, contract, imports })
}

/// Whether a component was made by componentize-qjs (jco's QuickJS backend, what the
/// JavaScript SDK builds with): its producers section names it.
pub fn built_by_quickjs(bytes: &[u8]) -> bool {
    const MARK: &[u8] = b"componentize-qjs";
    // Every plugin is scanned at every start: memchr's SIMD search, not a byte-by-byte window.
    memchr::memmem::find(bytes, MARK).is_some()
}
