//! A policy checked against the host's plugins: every name resolves to a loaded plugin of the
//! right world, every step grants what its plugin cannot do without, every config is
//! converted once. Compaction, handover and the lifecycle accept only this type, so a broken
//! policy is refused when loaded (naming file:line:column), never at the first boundary.

use std::ops::Deref;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};

use super::{Policy, StepSpec};
use crate::capabilities::Grants;
use crate::chain::{LAST_RESORT, SEED_STEP};
use crate::engine::World;
use crate::plugin::{Plugin, Registry, StepLimits};

/// One step of a checked policy: the plugin it runs and how.
#[derive(Clone)]
pub struct PolicyStep {
    pub plugin: Arc<Plugin>,
    pub grants: Grants,
    pub limits: StepLimits,
    /// The step's config as the JSON text the plugin receives ("" for none).
    pub config: String,
    /// Where the step's config is written (`file:line:column`), for a plugin's complaint
    /// about it at run time; `None` when the step has none.
    pub config_at: Option<String>,
}

/// One stage of the compaction pipeline: a fallback chain.
#[derive(Clone)]
pub struct Stage {
    pub name: String,
    pub chain: Vec<PolicyStep>,
}

#[derive(Clone)]
pub struct CheckedPolicy {
    policy: Arc<Policy>,
    /// The compaction pipeline's stages, the last without the host's `last-resort` (which
    /// always ends it).
    pub stages: Vec<Stage>,
    /// The handover chain, without the host's `host-seed` (which always ends it).
    pub handover: Vec<PolicyStep>,
    pub trigger: Option<PolicyStep>,
    pub commit: Option<PolicyStep>,
}

impl Deref for CheckedPolicy {
    type Target = Policy;

    fn deref(&self) -> &Policy {
        &self.policy
    }
}

impl CheckedPolicy {
    /// This policy with `compaction.budget_tokens` set to `budget` (`cairn eval --budget`).
    pub fn with_budget(mut self, budget: u64) -> Self {
        Arc::make_mut(&mut self.policy).compaction.budget_tokens = Some(budget);
        self
    }

    pub fn check(policy: Policy, plugins: &Registry) -> Result<Self> {
        let trigger = policy.trigger.as_ref().map(|spec| step(&policy, plugins, spec, World::Trigger)).transpose()?;
        let commit = policy.commit.as_ref().map(|spec| step(&policy, plugins, spec, World::CommitPolicy)).transpose()?;
        let stages = policy.stages().into_iter().map(|(name, specs)| Ok(Stage { name: name.to_string(), chain: steps(&policy, plugins, specs, LAST_RESORT)? })).collect::<Result<_>>()?;
        let handover = steps(&policy, plugins, &policy.handover, SEED_STEP)?;
        Ok(CheckedPolicy { policy: Arc::new(policy), stages, handover, trigger, commit })
    }

    /// Every strategy step of the compaction pipeline, stage after stage.
    pub fn compaction_steps(&self) -> impl Iterator<Item = &PolicyStep> {
        self.stages.iter().flat_map(|stage| &stage.chain)
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

/// A chain's steps; naming the host's own closing step is allowed and changes nothing.
fn steps(policy: &Policy, plugins: &Registry, specs: &[StepSpec], host_step: &str) -> Result<Vec<PolicyStep>> {
    specs.iter().filter(|spec| spec.plugin.get_ref() != host_step).map(|spec| step(policy, plugins, spec, World::Strategy)).collect()
}

fn step(policy: &Policy, plugins: &Registry, spec: &StepSpec, world: World) -> Result<PolicyStep> {
    let name = spec.plugin.get_ref();
    let at = policy.at(spec.plugin.span());
    let plugin = plugins.get(name).ok_or_else(|| {
        let known: Vec<&str> = plugins.iter().filter(|p| p.manifest.kind == world).map(|p| p.manifest.name.as_str()).collect();
        anyhow!("{at}: unknown {world} plugin `{name}` (known: {})", known.join(", "))
    })?;
    if plugin.manifest.kind != world {
        bail!("{at}: plugin `{name}` is a {} plugin, not a {world}", plugin.manifest.kind);
    }
    let grants = spec.grants();
    if let Some(interface) = plugin.ungranted_import(&grants) {
        let grant = match interface {
            crate::capabilities::Interface::Archive => "archive:read\" or \"archive:write".to_string(),
            other => other.to_string(),
        };
        bail!("{at}: plugin `{name}` needs the `{interface}` capability, which this step does not grant (add \"{grant}\" to its grants)");
    }
    let config = serde_json::to_value(spec.config.get_ref()).unwrap_or_default();
    let problems = plugin.config_problems(&config);
    if let Some(first) = problems.first() {
        let more = match problems.len() {
            1 => String::new(),
            n => format!("; and {} more: {}", n - 1, problems[1..].iter().map(|p| p.message.as_str()).collect::<Vec<_>>().join("; ")),
        };
        bail!("{}: {}", policy.config_at(spec, &first.path), plugin.says(format!("config does not match the plugin's config_schema: {}{more}", first.message)));
    }
    let config_at = (spec.config.span().end > 0).then(|| policy.config_at(spec, &[]));
    Ok(PolicyStep { plugin: plugin.clone(), grants, limits: spec.limits(), config: spec.config_json(), config_at })
}
