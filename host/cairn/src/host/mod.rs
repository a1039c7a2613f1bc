//! `Cairn`: what a harness embeds. It owns the engine, the plugin registry, the tokenizer and
//! the circuit breaker, and runs compactions and handovers: snapshot → window → chain →
//! checked outcome → archive → durable record.

mod run;

use std::sync::Arc;

use anyhow::Result;

use crate::chain::{self, BreakerSettings, CircuitBreaker, HostSeed, LastResort, StageSteps, Step, StepError, StepInput};
use crate::engine::Engine;
use crate::model::{ModelError, ModelProvider, ModelRequest};
use crate::plugin::{Plugin, Registry, WasmStrategy};
use crate::policy::{CheckedPolicy, Policy, PolicyStep};
use crate::record::{Boundary, CommitDecision, CompactionReport, OutcomeClass, Proposal, Purpose, TriggerDecision, TriggerInput};
use crate::storage::{ArchiveId, ConversationStore};
use crate::tokenizer::Tokenizer;
use crate::transcript::Transcript;

pub struct Cairn {
    registry: Registry,
    tokenizer: Tokenizer,
    /// Shared by every call this host makes, so a malfunctioning plugin is skipped for a
    /// while across compactions, triggers and commit policies alike.
    breaker: CircuitBreaker,
    /// A model the embedding harness supplies; it takes precedence over the policy's endpoint.
    model: Option<Arc<dyn ModelProvider>>,
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
    /// The harness's working directory: the files the conversation touched there are stamped
    /// in the record, so a later boundary can say which changed since (`workspace::stale`).
    pub workspace: Option<&'a std::path::Path>,
    /// The usable context window (window − reserve), where the harness knows it: the result
    /// is held to it (see `fit_stages`), and the target never exceeds it.
    pub window: Option<u64>,
    /// The context this compaction may leave, in tokens (overrides the policy's
    /// `compaction.budget_tokens`): the target, and a ceiling like `window`.
    pub budget: Option<u64>,
    /// Run the chain and report what it would commit, writing nothing at all.
    pub dry_run: bool,
    /// The context as the agent measured it at its last model request, where it says so: a
    /// provider's usage also bills what the agent sends besides the transcript (its system
    /// prompt and tool schemas). No compaction can shrink that part, so `window` less that
    /// part is what the transcript may fill. None: the transcript is all there is.
    pub usage: Option<crate::transcript::Usage>,
}

impl Cairn {
    /// A host with no plugins; add bundled ones with [`Cairn::add_plugin`].
    pub fn new() -> Result<Self> {
        Ok(Cairn { registry: Registry::new(Engine::new()?)?, tokenizer: Tokenizer::default(), breaker: CircuitBreaker::default(), model: None })
    }

    pub fn add_plugin(&mut self, manifest: &str, component: &[u8], source: &str) -> Result<&Plugin> {
        let plugin = self.registry.add(manifest, component, None, source)?;
        Ok(self.registry.get(&plugin.manifest.name).expect("just added"))
    }

    /// A plugin built into this binary, whose component's hex SHA-256 the build computed from
    /// the same bytes: hashing them again at every start would cost milliseconds for nothing.
    pub fn add_bundled_plugin(&mut self, manifest: &str, component: &'static [u8], sha256: &str) -> Result<&Plugin> {
        let plugin = self.registry.add(manifest, component, Some(sha256), "bundled")?;
        Ok(self.registry.get(&plugin.manifest.name).expect("just added"))
    }

    pub fn load_plugin_dir(&mut self, dir: &std::path::Path) -> Result<usize> {
        self.registry.load_dir(dir)
    }

    /// Hands Cairn the harness's own model: steps granted `model` call it.
    pub fn set_model_provider(&mut self, provider: Arc<dyn ModelProvider>) {
        self.model = Some(provider);
    }

    /// What a Wasm file is and imports, before any manifest is trusted (for diagnoses).
    pub fn inspect(&self, bytes: &[u8]) -> Result<crate::plugin::inspect::Inspection> {
        crate::plugin::inspect::inspect(self.registry.engine(), bytes)
    }

    /// Whether the compiled code of the component whose bytes hash to `sha256` (hex, as
    /// `BundledPlugin::sha256` carries it) is in the code cache for this host's engine: adding it
    /// would load in milliseconds rather than compile (seconds for a Python or JS plugin).
    pub fn is_compiled_in_cache(&self, sha256: &str) -> bool {
        self.registry.engine().holds_compiled(sha256)
    }

    pub fn plugins(&self) -> impl Iterator<Item = &Plugin> {
        self.registry.iter().map(|p| p.as_ref())
    }

    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    /// Parses a policy and checks it against this host's plugins; `source` (usually the file
    /// path) prefixes every error with its line and column.
    pub fn load_policy(&self, text: &str, source: &str) -> Result<CheckedPolicy> {
        self.check_policy(Policy::parse(text, source)?)
    }

    /// Checks a parsed policy against this host's plugins: names, worlds, grants, configs.
    pub fn check_policy(&self, policy: Policy) -> Result<CheckedPolicy> {
        CheckedPolicy::check(policy, &self.registry)
    }

    /// The embedded model-free default policy, checked (it needs the bundled plugins).
    pub fn default_policy(&self) -> Result<CheckedPolicy> {
        self.check_policy(Policy::default_policy())
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

    /// The pipeline's stages as steps to run: the last compaction stage ends with the host's
    /// `last-resort`, a handover (one stage) with its `host-seed`.
    fn stages<'p>(&self, policy: &'p CheckedPolicy, purpose: Purpose) -> Vec<StageSteps<'p>> {
        let model = self.model_for(policy);
        let wasm = |steps: &[crate::policy::PolicyStep]| -> Vec<Box<dyn Step>> {
            steps
                .iter()
                .map(|step| -> Box<dyn Step> {
                    Box::new(WasmStrategy {
                        engine: self.registry.engine().clone(),
                        plugin: step.plugin.clone(),
                        grants: step.grants.clone(),
                        limits: step.limits,
                        config: step.config.clone(),
                        config_at: step.config_at.clone(),
                        tokenizer: self.tokenizer,
                        model: model.clone(),
                    })
                })
                .collect()
        };
        match purpose {
            Purpose::Compact => {
                let mut stages: Vec<StageSteps<'p>> = policy.stages.iter().map(|stage| StageSteps::policy(&stage.name, wasm(&stage.chain))).collect();
                if let Some(last) = stages.last_mut() {
                    last.steps.push(Box::new(LastResort));
                }
                stages
            }
            Purpose::Handover => {
                let mut steps = wasm(&policy.handover);
                steps.push(Box::new(HostSeed));
                vec![StageSteps::policy("handover", steps)]
            }
        }
    }

    /// Compacts `transcript` under `policy`, recording everything in `store`.
    pub fn compact(&self, policy: &CheckedPolicy, store: &mut ConversationStore, transcript: &Transcript, source: &str) -> Result<CompactionReport> {
        self.compact_with(policy, store, transcript, source, RunOptions::default())
    }

    pub fn compact_with(&self, policy: &CheckedPolicy, store: &mut ConversationStore, transcript: &Transcript, source: &str, options: RunOptions<'_>) -> Result<CompactionReport> {
        self.run(Purpose::Compact, policy, store, transcript, source, options)
    }

    /// Hands the conversation over to a fresh session: the whole history after the protected
    /// head is archived and replaced by a seed. The prepared transition is in the durable
    /// record before this returns.
    pub fn handover(&self, policy: &CheckedPolicy, store: &mut ConversationStore, transcript: &Transcript, source: &str) -> Result<CompactionReport> {
        self.handover_with(policy, store, transcript, source, RunOptions::default())
    }

    pub fn handover_with(&self, policy: &CheckedPolicy, store: &mut ConversationStore, transcript: &Transcript, source: &str, options: RunOptions<'_>) -> Result<CompactionReport> {
        self.run(Purpose::Handover, policy, store, transcript, source, options)
    }

    /// Runs step `index` of the first compaction stage on `input` alone: no other step, no
    /// checks, nothing recorded. For measuring a plugin (`cairn bench`), not for compacting.
    pub fn run_step(&self, policy: &CheckedPolicy, index: usize, input: &StepInput<'_>) -> Option<chain::StepAnswer> {
        let mut stages = self.stages(policy, Purpose::Compact);
        let first = stages.first_mut()?;
        (index < first.steps.len()).then(|| first.steps.swap_remove(index).run(input))
    }

    /// Asks a trigger plugin; the breaker skips one that keeps malfunctioning.
    pub fn ask_trigger(&self, step: &PolicyStep, input: &TriggerInput, breaker: BreakerSettings) -> Result<TriggerDecision, StepError> {
        self.guarded(&step.plugin, breaker, || step.plugin.decide_trigger(self.registry.engine(), step.limits, &step.grants, input, &step.config))
    }

    /// Asks a commit-policy plugin; the breaker skips one that keeps malfunctioning.
    pub fn ask_commit(&self, step: &PolicyStep, boundary: &Boundary, proposal: &Proposal, breaker: BreakerSettings) -> Result<CommitDecision, StepError> {
        self.guarded(&step.plugin, breaker, || step.plugin.decide_commit(self.registry.engine(), step.limits, &step.grants, boundary, proposal, &step.config))
    }

    fn guarded<T>(&self, plugin: &Plugin, settings: BreakerSettings, call: impl FnOnce() -> Result<T, StepError>) -> Result<T, StepError> {
        if let Some(why) = self.breaker.refuses(plugin.label()) {
            return Err(StepError::Unavailable(plugin.says(format!("skipped: {why}"))));
        }
        let answer = call();
        self.breaker.record(plugin.label(), answer.as_ref().map_or_else(StepError::class, |_| OutcomeClass::Ok), settings);
        answer
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
