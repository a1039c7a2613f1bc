//! `Cairn`: what a harness embeds. It owns the engine, the plugin registry and the tokenizer,
//! and runs one compaction: snapshot → window → chain → checked outcome → durable record.

use anyhow::{anyhow, Result};
use serde::Serialize;

use crate::chain::{self, LastResort, Step, StepInput, StepReport, Window, LAST_RESORT};
use crate::engine::Engine;
use crate::plugin::{Plugin, Registry, WasmStrategy};
use crate::policy::Policy;
use crate::storage::{ArchiveId, CompactionEvent, ConversationStore};
use crate::tokenizer::Tokenizer;
use crate::transcript::Transcript;

pub struct Cairn {
    engine: Engine,
    registry: Registry,
    tokenizer: Tokenizer,
}

/// What one compaction did.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionReport {
    pub conversation: String,
    pub archive_id: String,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub steps: Vec<StepReport>,
    /// The plugin whose outcome was committed, if any.
    pub committed_by: Option<String>,
    /// How many entries the committed outcome replaced.
    pub replaced: usize,
    /// Ids the working context no longer holds (they stay in the durable record).
    pub forgotten: Vec<String>,
    /// `artifact://` URIs written for this compaction.
    pub artifacts: Vec<String>,
    /// The new working context.
    #[serde(skip)]
    pub transcript: Transcript,
}

impl Cairn {
    /// A host with no plugins; add bundled ones with [`Cairn::add_plugin`].
    pub fn new() -> Result<Self> {
        Ok(Cairn { engine: Engine::new()?, registry: Registry::default(), tokenizer: Tokenizer::default() })
    }

    pub fn add_plugin(&mut self, manifest: &str, component: &[u8], source: &str) -> Result<&Plugin> {
        let plugin = self.registry.add(&self.engine, manifest, component, source)?;
        Ok(self.registry.get(&plugin.manifest.name).expect("just added"))
    }

    pub fn load_plugin_dir(&mut self, dir: &std::path::Path) -> Result<usize> {
        self.registry.load_dir(&self.engine, dir)
    }

    pub fn plugins(&self) -> impl Iterator<Item = &Plugin> {
        self.registry.iter().map(|p| p.as_ref())
    }

    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    /// Resolves a policy's chain against the known plugins; the host's last resort ends it.
    pub fn chain(&self, policy: &Policy) -> Result<Vec<Box<dyn Step>>> {
        let mut steps: Vec<Box<dyn Step>> = Vec::new();
        for spec in &policy.chain {
            let name = spec.plugin.get_ref();
            if name == LAST_RESORT {
                continue;
            }
            let plugin = self.registry.get(name).ok_or_else(|| {
                let known: Vec<&str> = self.registry.iter().map(|p| p.manifest.name.as_str()).collect();
                anyhow!("{}: unknown plugin `{name}` (known: {}, {LAST_RESORT})", policy.at(spec.plugin.span()), known.join(", "))
            })?;
            steps.push(Box::new(WasmStrategy::new(
                self.engine.clone(),
                plugin.clone(),
                spec.grants(),
                spec.limits(),
                spec.config_json(),
                self.tokenizer,
            )));
        }
        steps.push(Box::new(LastResort));
        Ok(steps)
    }

    /// Compacts `transcript` under `policy`, recording everything in `store`.
    /// The durable record gets the input's new entries first, then artifacts, then the event.
    pub fn compact(&self, policy: &Policy, store: &mut ConversationStore, transcript: &Transcript, source: &str) -> Result<CompactionReport> {
        let steps = self.chain(policy)?;
        let mut transcript = transcript.clone();
        self.tokenizer.count_transcript(&mut transcript);
        store.record_snapshot(source, &transcript.entries)?;

        let tokens_before = transcript.total_tokens();
        let settings = &policy.compaction;
        let window = Window::compute(&transcript.entries, settings.keep_recent(tokens_before), settings.target(tokens_before));
        let archive_id = ArchiveId::generate(store.key());
        tracing::info!(conversation = %store.key(), %archive_id, tokens_before, ?window, "compacting");

        let archive = Some(std::sync::Arc::new(store.archive_view()?));
        let input = StepInput { entries: &transcript.entries, window: &window, archive_id: archive_id.as_str(), archive, preserve: None, resume: None };
        let run = chain::run(&steps, &input, &self.tokenizer);

        let mut report = CompactionReport {
            conversation: store.key().to_string(),
            archive_id: archive_id.to_string(),
            tokens_before,
            tokens_after: tokens_before,
            steps: run.steps,
            committed_by: None,
            replaced: 0,
            forgotten: Vec::new(),
            artifacts: Vec::new(),
            transcript: Transcript::default(),
        };
        let mut event = CompactionEvent {
            at: crate::storage::now_millis(),
            archive_id: archive_id.to_string(),
            committed_by: None,
            replaced: Vec::new(),
            forgotten: Vec::new(),
            replacement: Vec::new(),
            tokens_before,
            tokens_after: tokens_before,
            steps: report.steps.clone(),
            artifacts: Vec::new(),
            checkpoint: None,
        };
        match run.committed {
            Some(committed) => {
                let applied = committed.applied;
                let originals = &transcript.entries[applied.first..=applied.last];
                let artifacts = store.write_archive(&archive_id, originals, &committed.artifacts)?;
                event.replaced = originals.iter().map(|e| e.id.clone()).collect();
                report.tokens_after = applied.tokens_after;
                report.committed_by = Some(committed.plugin.clone());
                report.replaced = applied.last - applied.first + 1;
                report.forgotten = applied.forgotten.clone();
                report.artifacts = artifacts.clone();
                event.committed_by = Some(committed.plugin);
                event.forgotten = applied.forgotten;
                event.replacement = applied.replacement;
                event.tokens_after = applied.tokens_after;
                event.artifacts = artifacts;
                event.checkpoint = committed.checkpoint;
                report.transcript = Transcript::new(applied.context);
            }
            None => report.transcript = transcript,
        }
        store.record_compaction(event)?;
        Ok(report)
    }
}
