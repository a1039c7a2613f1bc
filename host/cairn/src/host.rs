//! `Cairn`: what a harness embeds. It owns the engine, the plugin registry, the tokenizer and
//! the circuit breaker, and runs compactions and handovers: snapshot → window → chain →
//! checked outcome → archive → durable record.

use std::sync::Arc;

use anyhow::{anyhow, Result};
use serde::Serialize;

use crate::chain::{self, CircuitBreaker, HostSeed, LastResort, Purpose, Step, StepInput, StepReport, Window, LAST_RESORT, SEED_STEP};
use crate::engine::Engine;
use crate::lifecycle::{kept_summary_ids, CommitDecision, Proposal};
use crate::model::{ModelError, ModelProvider, ModelRequest};
use crate::plugin::{Plugin, Registry, WasmStrategy};
use crate::policy::{Policy, StepSpec};
use crate::storage::{ArchiveId, CompactionEvent, ConversationStore, Sessions};
use crate::tokenizer::Tokenizer;
use crate::transcript::Transcript;

pub struct Cairn {
    engine: Engine,
    registry: Registry,
    tokenizer: Tokenizer,
    breaker: CircuitBreaker,
    /// A model the embedding harness supplies; it takes precedence over the policy's endpoint.
    model: Option<Arc<dyn ModelProvider>>,
}

/// What one compaction or handover did.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionReport {
    pub conversation: String,
    pub purpose: Purpose,
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
    pub checkpoint: Option<String>,
    /// Handover: the text that starts the next session, and the sessions involved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// The new working context.
    #[serde(skip)]
    pub transcript: Transcript,
    /// Why the commit policy refused the outcome, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

impl CompactionReport {
    /// The report of an attempt already in the record (after a crash, for bookkeeping).
    pub fn from_event(conversation: &crate::storage::ConversationKey, event: &CompactionEvent) -> Self {
        CompactionReport {
            conversation: conversation.to_string(),
            purpose: event.purpose,
            archive_id: event.archive_id.clone(),
            tokens_before: event.tokens_before,
            tokens_after: event.tokens_after,
            steps: event.steps.clone(),
            committed_by: event.committed_by.clone(),
            replaced: event.replaced.len(),
            forgotten: event.forgotten.clone(),
            artifacts: event.artifacts.clone(),
            checkpoint: event.checkpoint.clone(),
            seed: event.seed.clone(),
            sessions: event.sessions.clone(),
            transcript: Transcript::default(),
            rejected: event.rejected.clone(),
        }
    }
}

/// How a compaction or handover runs beyond the policy.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Reuse this archive id (resuming a prepared handover); a fresh one otherwise.
    pub archive_id: Option<ArchiveId>,
    /// The agent's instructions: what must survive, how to resume.
    pub preserve: Option<&'a str>,
    pub resume: Option<&'a str>,
    /// The commit policy's last word on the checked outcome.
    pub approve: Option<&'a dyn Fn(&Proposal) -> CommitDecision>,
}

impl Cairn {
    /// A host with no plugins; add bundled ones with [`Cairn::add_plugin`].
    pub fn new() -> Result<Self> {
        Ok(Cairn {
            engine: Engine::new()?,
            registry: Registry::default(),
            tokenizer: Tokenizer::default(),
            breaker: CircuitBreaker::default(),
            model: None,
        })
    }

    pub fn add_plugin(&mut self, manifest: &str, component: &[u8], source: &str) -> Result<&Plugin> {
        let plugin = self.registry.add(&self.engine, manifest, component, source)?;
        Ok(self.registry.get(&plugin.manifest.name).expect("just added"))
    }

    pub fn load_plugin_dir(&mut self, dir: &std::path::Path) -> Result<usize> {
        self.registry.load_dir(&self.engine, dir)
    }

    /// Hands Cairn the harness's own model: steps granted `model` call it.
    pub fn set_model_provider(&mut self, provider: Arc<dyn ModelProvider>) {
        self.model = Some(provider);
    }

    pub fn plugins(&self) -> impl Iterator<Item = &Plugin> {
        self.registry.iter().map(|p| p.as_ref())
    }

    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    /// The model steps will call: the embedder's, else the policy's (a misconfigured one
    /// answers `unavailable` so the chain falls through instead of failing).
    fn model_for(&self, policy: &Policy) -> Option<Arc<dyn ModelProvider>> {
        if let Some(model) = &self.model {
            return Some(model.clone());
        }
        let settings = policy.model.as_ref()?;
        Some(settings.provider().unwrap_or_else(|e| {
            tracing::warn!(policy = %policy.source, "model unavailable: {e:#}");
            Arc::new(Unconfigured(e.to_string()))
        }))
    }

    /// Checks that every plugin a policy names is known and of the right kind, so a broken
    /// policy is refused when loaded rather than at the first boundary that needs it.
    pub fn check_policy(&self, policy: &Policy) -> Result<()> {
        use crate::engine::World;
        self.chain(policy)?;
        self.handover_chain(policy)?;
        for (spec, world) in [(&policy.trigger, World::Trigger), (&policy.commit, World::CommitPolicy)] {
            if let Some(spec) = spec {
                let plugin = self.plugin_for(policy, spec)?;
                if plugin.manifest.kind != world {
                    anyhow::bail!("{}: plugin `{}` is a {} plugin, not a {world}", policy.at(spec.plugin.span()), plugin.manifest.name, plugin.manifest.kind);
                }
            }
        }
        for spec in policy.chain.iter().chain(&policy.handover) {
            if let Some(plugin) = self.registry.get(spec.plugin.get_ref()) {
                if plugin.manifest.kind != World::Strategy {
                    anyhow::bail!("{}: plugin `{}` is a {} plugin, not a strategy", policy.at(spec.plugin.span()), plugin.manifest.name, plugin.manifest.kind);
                }
            }
        }
        Ok(())
    }

    /// Resolves a policy's compaction chain; the host's last resort ends it.
    pub fn chain(&self, policy: &Policy) -> Result<Vec<Box<dyn Step>>> {
        let mut steps = self.steps(policy, &policy.chain, &[LAST_RESORT])?;
        steps.push(Box::new(LastResort));
        Ok(steps)
    }

    /// Resolves a policy's handover chain; the host's seed step ends it.
    pub fn handover_chain(&self, policy: &Policy) -> Result<Vec<Box<dyn Step>>> {
        let mut steps = self.steps(policy, &policy.handover, &[SEED_STEP])?;
        steps.push(Box::new(HostSeed));
        Ok(steps)
    }

    fn steps(&self, policy: &Policy, specs: &[StepSpec], host_steps: &[&str]) -> Result<Vec<Box<dyn Step>>> {
        let model = self.model_for(policy);
        let mut steps: Vec<Box<dyn Step>> = Vec::new();
        for spec in specs {
            let name = spec.plugin.get_ref();
            if host_steps.contains(&name.as_str()) {
                continue;
            }
            let plugin = self.registry.get(name).ok_or_else(|| {
                let known: Vec<&str> = self.registry.iter().map(|p| p.manifest.name.as_str()).chain(host_steps.iter().copied()).collect();
                anyhow!("{}: unknown plugin `{name}` (known: {})", policy.at(spec.plugin.span()), known.join(", "))
            })?;
            steps.push(Box::new(WasmStrategy::new(
                self.engine.clone(),
                plugin.clone(),
                spec.grants(),
                spec.limits(),
                spec.config_json(),
                self.tokenizer,
                model.clone(),
            )));
        }
        Ok(steps)
    }

    /// Compacts `transcript` under `policy`, recording everything in `store`.
    pub fn compact(&self, policy: &Policy, store: &mut ConversationStore, transcript: &Transcript, source: &str) -> Result<CompactionReport> {
        self.compact_with(policy, store, transcript, source, RunOptions::default())
    }

    pub fn compact_with(&self, policy: &Policy, store: &mut ConversationStore, transcript: &Transcript, source: &str, options: RunOptions<'_>) -> Result<CompactionReport> {
        let steps = self.chain(policy)?;
        self.run(Purpose::Compact, &steps, policy, store, transcript, source, options)
    }

    /// Hands the conversation over to a fresh session: the whole history after the protected
    /// head is archived and replaced by a seed. The prepared transition is in the durable
    /// record before this returns.
    pub fn handover(&self, policy: &Policy, store: &mut ConversationStore, transcript: &Transcript, source: &str) -> Result<CompactionReport> {
        self.handover_with(policy, store, transcript, source, RunOptions::default())
    }

    pub fn handover_with(&self, policy: &Policy, store: &mut ConversationStore, transcript: &Transcript, source: &str, options: RunOptions<'_>) -> Result<CompactionReport> {
        let steps = self.handover_chain(policy)?;
        self.run(Purpose::Handover, &steps, policy, store, transcript, source, options)
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The plugin a lifecycle section names, with its position in the policy for errors.
    pub(crate) fn plugin_for(&self, policy: &Policy, spec: &StepSpec) -> Result<&Arc<Plugin>> {
        let name = spec.plugin.get_ref();
        self.registry.get(name).ok_or_else(|| anyhow!("{}: unknown plugin `{name}`", policy.at(spec.plugin.span())))
    }

    /// The durable record gets the input's new entries first, then the archive, then the event.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        purpose: Purpose,
        steps: &[Box<dyn Step>],
        policy: &Policy,
        store: &mut ConversationStore,
        transcript: &Transcript,
        source: &str,
        options: RunOptions<'_>,
    ) -> Result<CompactionReport> {
        let mut transcript = transcript.clone();
        self.tokenizer.count_transcript(&mut transcript);
        store.record_snapshot(source, &transcript.entries)?;

        let tokens_before = transcript.total_tokens();
        let settings = &policy.compaction;
        let window = match purpose {
            Purpose::Compact => Window::compute(&transcript.entries, settings.keep_recent(tokens_before), settings.target(tokens_before)),
            Purpose::Handover => Window::handover(&transcript.entries),
        };
        let archive_id = options.archive_id.unwrap_or_else(|| ArchiveId::generate(store.key()));
        tracing::info!(conversation = %store.key(), %archive_id, ?purpose, tokens_before, ?window, "running chain");

        let input = StepInput {
            purpose,
            entries: &transcript.entries,
            window: &window,
            archive_id: archive_id.as_str(),
            archive: Some(Arc::new(store.archive_view()?)),
            preserve: options.preserve,
            resume: options.resume,
            previous_checkpoint: store.latest_checkpoint(),
            deadline: settings.chain_deadline(),
        };
        let run = chain::run(steps, &input, &self.tokenizer, &self.breaker, settings.breaker());

        let mut event = CompactionEvent::new(purpose, archive_id.as_str(), tokens_before, run.steps.clone());
        let verdict = match (&run.committed, options.approve) {
            (Some(committed), Some(approve)) => {
                let replacement_ids: Vec<String> = committed.applied.replacement.iter().map(|e| e.id.clone()).collect();
                approve(&Proposal {
                    strategy: committed.plugin.clone(),
                    tokens_before,
                    tokens_after: committed.applied.tokens_after,
                    replaced_ids: transcript.entries[committed.applied.first..=committed.applied.last].iter().map(|e| e.id.clone()).collect(),
                    kept_summary_ids: kept_summary_ids(&committed.applied.context, &replacement_ids),
                })
            }
            _ => CommitDecision::Commit,
        };
        if let CommitDecision::Defer(why) | CommitDecision::Reject(why) = verdict {
            tracing::info!(conversation = %store.key(), "commit policy refused the outcome: {why}");
            event.rejected = Some(why);
        }
        let committed = match run.committed {
            Some(committed) if event.rejected.is_none() => committed,
            _ => {
                store.record_compaction(event.clone())?;
                let mut report = CompactionReport::from_event(store.key(), &event);
                report.transcript = transcript;
                return Ok(report);
            }
        };
        let applied = committed.applied;
        let originals = &transcript.entries[applied.first..=applied.last];
        let artifacts = store.write_archive(&archive_id, originals, &committed.artifacts)?;
        crate::fault::point("archived");
        if purpose == Purpose::Handover {
            let source = store.current_session();
            let target = crate::storage::session_id(store.key().as_str(), archive_id.as_str());
            event.sessions = Some(Sessions { source, target });
        }
        event.committed_by = Some(committed.plugin.clone());
        event.replaced = originals.iter().map(|e| e.id.clone()).collect();
        event.forgotten = applied.forgotten;
        event.replacement = applied.replacement;
        event.tokens_after = applied.tokens_after;
        event.artifacts = artifacts;
        event.checkpoint = committed.checkpoint;
        event.seed = committed.seed;
        event.retrospective = committed.retrospective;
        store.record_compaction(event.clone())?;
        crate::fault::point("recorded");

        // The report says exactly what the record says.
        let mut report = CompactionReport::from_event(store.key(), &event);
        report.transcript = Transcript::new(applied.context);
        Ok(report)
    }
}

/// Stands in for a policy's model that could not be set up (e.g. its key variable is unset).
struct Unconfigured(String);

impl ModelProvider for Unconfigured {
    fn complete(&self, _: &ModelRequest, _: std::time::Instant) -> Result<String, ModelError> {
        Err(ModelError::Unavailable(self.0.clone()))
    }

    fn describe(&self) -> String {
        "unconfigured model".into()
    }
}
