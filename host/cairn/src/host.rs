//! `Cairn`: what a harness embeds. It owns the engine, the plugin registry, the tokenizer and
//! the circuit breaker, and runs compactions and handovers: snapshot → window → chain →
//! checked outcome → archive → durable record.

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::Result;

use crate::chain::{self, Applied, BreakerSettings, CircuitBreaker, HostSeed, LastResort, StageSteps, Step, StepError, StepInput, Window};
use crate::engine::Engine;
use crate::model::{ModelError, ModelProvider, ModelRequest};
use crate::plugin::{Plugin, Registry, WasmStrategy};
use crate::policy::{CheckedPolicy, Policy, PolicyStep};
use crate::record::{kept_summary_ids, Boundary, CommitDecision, CompactionEvent, CompactionReport, OutcomeClass, Proposal, Purpose, Sessions, TriggerDecision, TriggerInput};
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
        let plugin = self.registry.add(manifest, component, source)?;
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

    /// Whether `component`'s compiled code is in the code cache for this host's engine: adding
    /// it would load in milliseconds rather than compile (seconds for a Python or JS plugin).
    pub fn is_compiled_in_cache(&self, component: &[u8]) -> bool {
        self.registry.engine().holds_compiled(&crate::plugin::hex_sha256(component))
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

    /// The durable record gets the input's new entries first, then the archive, then the event.
    #[allow(clippy::too_many_arguments)]
    fn run(&self, purpose: Purpose, policy: &CheckedPolicy, store: &mut ConversationStore, transcript: &Transcript, source: &str, options: RunOptions<'_>) -> Result<CompactionReport> {
        // Ids name entries in the record and in every plugin's answer: two entries with one id
        // would be one in the record and blamed on the first plugin that carried either.
        let mut seen = std::collections::HashMap::new();
        for (i, entry) in transcript.entries.iter().enumerate() {
            if let Some(first) = seen.insert(entry.id.as_str(), i) {
                anyhow::bail!("{source}: entry id {:?} is used twice (entries {} and {}): ids must be unique", entry.id, first + 1, i + 1);
            }
        }
        let mut transcript = transcript.clone();
        self.tokenizer.count_transcript(&mut transcript);
        if !options.dry_run {
            store.record_snapshot(source, &transcript.entries)?;
        }
        // Pins are the host's: set for the chain, cleared again in what the harness gets back.
        let harness_pinned: HashSet<String> = transcript.entries.iter().filter(|e| e.pinned).map(|e| e.id.clone()).collect();
        let pins = crate::pins::apply(&mut transcript.entries, &store.pinned_ids(), &policy.pins);
        for refused in &pins.refused {
            tracing::warn!(conversation = %store.key(), "{refused}");
        }
        let unpin = |entries: &mut [crate::transcript::Entry]| entries.iter_mut().filter(|e| e.pinned && !harness_pinned.contains(&e.id)).for_each(|e| e.pinned = false);

        let tokens_before = transcript.total_tokens();
        let settings = &policy.compaction;
        // What the agent sends besides the transcript: the room it takes is not the transcript's.
        let unseen = options.usage.and_then(|usage| usage.context_tokens(&transcript.entries)).map_or(0, |measured| measured.saturating_sub(tokens_before));
        let usable = options.window.map(|window| match window.checked_sub(unseen).filter(|&left| left > 0) {
            Some(left) => {
                if unseen > 0 {
                    tracing::info!(conversation = %store.key(), unseen, window, left, "the agent's usage holds tokens the transcript does not: the window left for it is smaller");
                }
                left
            }
            // Nothing the transcript could become would fit: dropping all of it would not help.
            None => {
                tracing::warn!(conversation = %store.key(), unseen, window, "the agent's usage beyond the transcript fills the whole window: held to the window alone");
                window
            }
        });
        // A budget is the target (the strategies fill it by value) and, like the usable window,
        // a ceiling the result is held to.
        let budget = options.budget.or(settings.budget_tokens);
        let ceiling = usable.into_iter().chain(budget).min();
        // Where the ceiling is known the verbatim tail is also at most its share of it: a tail
        // larger than the window (a small model's) could not fit whatever ran before it. Under a
        // budget the share is a tenth — the operator's rules and facts are worth more per token
        // than the newest chatter, and the checkpoint quotes the latest request anyway — and
        // none when what the operator said alone is more than the budget.
        let operator_tokens: u64 = transcript.entries.iter().filter(|e| e.role == crate::transcript::Role::User && e.origin == crate::transcript::Origin::Operator).map(|e| e.tokens as u64).sum();
        let share = match budget {
            Some(budget) if operator_tokens > budget => 0.0,
            Some(_) => BUDGET_TAIL_SHARE,
            None => settings.keep_recent_at_most,
        };
        let keep_recent = ceiling.map_or(settings.keep_recent(tokens_before), |usable| settings.keep_recent(tokens_before).min((usable as f64 * share) as u64));
        let target = match budget {
            Some(_) => ceiling.expect("a budget is a ceiling"),
            None => usable.map_or(settings.target(tokens_before), |usable| settings.target(tokens_before).min(usable)),
        };
        let window = match purpose {
            Purpose::Compact if budget.is_some() => Window::within(&transcript.entries, keep_recent, target),
            Purpose::Compact => Window::compute(&transcript.entries, keep_recent, target),
            Purpose::Handover => Window::handover(&transcript.entries),
        };
        let archive_id = options.archive_id.unwrap_or_else(|| ArchiveId::generate(store.key()));
        tracing::info!(conversation = %store.key(), %archive_id, ?purpose, tokens_before, ?window, "running chain");

        let input = StepInput {
            purpose,
            entries: &transcript.entries,
            window: &window,
            archive_id: archive_id.as_str(),
            artifacts_before: 0,
            archive: Some(Arc::new(store.archive_view()?)),
            preserve: options.preserve,
            resume: options.resume,
            previous_checkpoint: store.latest_checkpoint(),
            previous_checkpoint_through: store.latest_checkpoint_through(),
            deadline: settings.chain_deadline(),
            reject_unverified: settings.reject_unverified,
            budget,
        };
        let mut stages = self.stages(policy, purpose);
        if purpose == Purpose::Compact {
            hold_to_window(&mut stages, &transcript.entries, &window, settings.keep_recent_tokens, ceiling);
        }
        let seeds = store.seed_ids();
        let known: HashSet<&str> = transcript.entries.iter().map(|e| e.id.as_str()).collect();
        // The commit policy judges each checked outcome as the chain produces it.
        let proposal = |plugin: &str, applied: &Applied| Proposal {
            strategy: plugin.to_string(),
            tokens_before,
            tokens_after: applied.tokens_after,
            replaced_ids: transcript.entries[applied.first..=applied.last].iter().map(|e| e.id.clone()).collect(),
            kept_summary_ids: kept_summary_ids(&applied.context, &applied.replacement.iter().filter(|e| !known.contains(e.id.as_str())).collect::<Vec<_>>(), &seeds),
        };
        let approve = options.approve.map(|approve| move |plugin: &str, applied: &Applied| approve(&proposal(plugin, applied)));
        let run = chain::run_pipeline(&stages, &input, &self.tokenizer, &self.breaker, settings.breaker(), approve.as_ref().map(|a| a as chain::Approve<'_>));

        let mut event = CompactionEvent::new(purpose, archive_id.as_str(), tokens_before, run.steps.clone());
        event.rejected = run.refused;
        event.pinned = pins.pinned;
        event.pins_refused = pins.refused;
        let mut committed = match run.committed {
            Some(committed) => committed,
            None => {
                event.over_window = over_window(&transcript.entries, ceiling, budget);
                if !options.dry_run {
                    store.record_compaction(event.clone())?;
                }
                unpin(&mut transcript.entries);
                let mut report = CompactionReport::from_event(store.key().as_str(), &event);
                report.transcript = transcript;
                report.dry_run = options.dry_run;
                return Ok(report);
            }
        };
        // A checkpoint of Cairn's the harness handed back quotes the first request of a history
        // the record may not hold.
        let handed_back = transcript.entries.iter().filter(|e| e.origin == crate::transcript::Origin::Summary).find_map(|e| cairn_rules::intent::checkpoint_root_objective(&e.model_text()));
        let first_request = handed_back.or_else(|| store.first_operator_request());
        chain::anchor::root_objective(&mut committed, input.previous_checkpoint, first_request.as_deref(), &self.tokenizer, ceiling, budget.is_some());
        chain::anchor::preserve(&mut committed, options.preserve, archive_id.as_str(), &self.tokenizer);
        event.over_window = over_window(&committed.applied.context, ceiling, budget);
        let mut applied = committed.applied;
        unpin(&mut applied.context);
        unpin(&mut applied.replacement);
        unpin(&mut transcript.entries[applied.first..=applied.last]);
        let originals = &transcript.entries[applied.first..=applied.last];
        // The archive and the event that commits it are one unit.
        let artifacts = if options.dry_run {
            crate::storage::ArtifactUri::numbered(&archive_id, committed.artifacts.len())
        } else {
            store.begin()?;
            store.write_archive(&archive_id, originals, &committed.artifacts)?
        };
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
        event.checkpoint_through = committed.checkpoint.as_ref().and_then(|_| transcript.entries.last()).map(|e| e.id.clone());
        event.checkpoint = committed.checkpoint;
        event.seed = committed.seed;
        event.retrospective = committed.retrospective;
        if let Some(workspace) = options.workspace {
            event.files = crate::workspace::stamp(workspace, &crate::workspace::touched_paths(&transcript.entries));
        }
        if options.dry_run {
            let mut report = CompactionReport::from_event(store.key().as_str(), &event);
            report.transcript = Transcript::new(applied.context);
            report.dry_run = true;
            report.cache_rewrite = crate::pricing::rewrite(report.tokens_before, report.tokens_after);
            return Ok(report);
        }
        store.record_compaction(event.clone())?;
        crate::fault::point("recorded");
        store.commit()?;

        // The report says exactly what the record says.
        let mut report = CompactionReport::from_event(store.key().as_str(), &event);
        report.transcript = Transcript::new(applied.context);
        Ok(report)
    }
}

/// The verbatim tail's share of a budget (a window's is the policy's `keep_recent_at_most`).
const BUDGET_TAIL_SHARE: f64 = 0.1;

/// Host stages around the policy's, so every result fits. First, where a tool output the
/// strategies cannot reach (in the verbatim tail or the protected head) is larger than the
/// tail's whole share (`keep_recent_tokens`), a clip of such outputs: no entry is too big to
/// touch, the newest turn's included. Then, where the usable window is known, while the result
/// is still above it: a clip of every output over an eighth of it, then the last resort. The
/// clip keeps every call and the operator's words; it runs before anything is dropped.
fn hold_to_window(stages: &mut Vec<StageSteps<'_>>, entries: &[crate::transcript::Entry], window: &Window, keep_recent_tokens: u64, usable: Option<u64>) {
    let share = keep_recent_tokens.max(chain::clip::MIN_TOKENS);
    let reachable = window.protected_head..window.tail_start;
    if entries.iter().enumerate().any(|(i, e)| !reachable.contains(&i) && chain::oversized(e, share)) {
        let clip: Vec<Box<dyn Step>> = vec![Box::new(chain::Clip { limit: share, leave: reachable })];
        stages.insert(0, StageSteps { name: "clip", steps: clip, reach: chain::Reach::PastTail, until: None });
    }
    if let Some(usable) = usable {
        let limit = (usable / 8).max(chain::clip::MIN_TOKENS);
        stages.push(StageSteps { name: "fit", steps: vec![Box::new(chain::Clip { limit, leave: 0..0 })], reach: chain::Reach::PastTail, until: Some(usable) });
        stages.push(StageSteps { name: "fit-drop", steps: vec![Box::new(LastResort)], reach: chain::Reach::Window, until: Some(usable) });
    }
}

/// Why `context` does not fit the `ceiling` (the usable window or the budget, the smaller), if
/// it does not: what takes the room — the checkpoint included — that nothing may clip or drop.
fn over_window(context: &[crate::transcript::Entry], ceiling: Option<u64>, budget: Option<u64>) -> Option<String> {
    use crate::transcript::{Origin, Role};
    let usable = ceiling?;
    let what = if budget == Some(usable) { "the budget" } else { "the usable window" };
    let total: u64 = context.iter().map(|e| e.tokens as u64).sum();
    if total <= usable {
        return None;
    }
    let sum = |keep: &dyn Fn(&crate::transcript::Entry) -> bool| context.iter().filter(|e| keep(e)).map(|e| e.tokens as u64).sum::<u64>();
    let operator = sum(&|e| e.role == Role::User && e.origin == Origin::Operator);
    let system = sum(&|e| e.role == Role::System);
    let pinned = sum(&|e| e.pinned);
    let summary = sum(&|e| e.origin == Origin::Summary && !e.pinned);
    Some(format!(
        "the context is still {total} tokens, over {what} of {usable}: the operator's own messages take {operator}, the system prompt {system}, \
         pinned entries {pinned}, the checkpoint {summary}, and nothing may clip or drop those"
    ))
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
