//! The policy file (TOML): compaction settings and the strategy chain with each step's
//! plugin, grants, limits and config. Errors cite the file, line and column. A parsed
//! [`Policy`] is checked against the host's plugins once ([`CheckedPolicy`]); only a checked
//! policy runs.

mod checked;

pub use checked::{CheckedPolicy, PolicyStep, Stage};

use std::ops::Range;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Deserialize;
use toml::Spanned;

use crate::capabilities::{Capability, Grants};
use crate::chain::BreakerSettings;
use crate::model::ModelSettings;
use crate::plugin::StepLimits;

/// The `[lifecycle]` section of a policy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LifecycleSettings {
    pub cooldown_turns: u32,
    /// After this many maintenances in a row that free too little, automatic maintenance pauses.
    pub pause_after: u32,
    /// A maintenance frees "too little" below this share of the context.
    pub min_freed_ratio: f64,
    /// A pause ends by itself this many turns after it began (0: only a resume or a
    /// successful agent request ends it).
    pub resume_after_turns: u32,
    /// Tokens a harness may add back after a compaction (files it re-reads, its plan, Cairn's
    /// own session-start context): counted into the floor a compaction leaves.
    pub reinject_budget_tokens: u64,
    /// The thrash guard: a compaction whose floor (what it left plus the re-injection budget,
    /// or what the next boundary measured) leaves less than this share of the usable window
    /// free would trigger again within turns, so the next automatic maintenance is a handover.
    pub min_headroom_ratio: f64,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        LifecycleSettings { cooldown_turns: 5, pause_after: 3, min_freed_ratio: 0.10, resume_after_turns: 20, reinject_budget_tokens: 10_000, min_headroom_ratio: 0.15 }
    }
}

/// The embedded default policy (model-free).
pub const DEFAULT_POLICY: &str = include_str!("default.toml");

const MAX_MEMORY_MIB: u64 = 4096;
const MAX_TIMEOUT_MS: u64 = 600_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub compaction: CompactionSettings,
    /// The compaction chain: a pipeline of one stage.
    #[serde(default)]
    pub chain: Vec<StepSpec>,
    /// The compaction pipeline, when it has more than one stage (instead of `chain`).
    #[serde(default)]
    pub stage: Vec<StageSpec>,
    /// The handover chain (a host-native seed step always ends it).
    #[serde(default)]
    pub handover: Vec<StepSpec>,
    /// The model endpoint for steps granted `model`; the key comes from the environment.
    #[serde(default)]
    pub model: Option<ModelSettings>,
    /// The trigger plugin (when to act); none means never automatically.
    #[serde(default)]
    pub trigger: Option<StepSpec>,
    /// The commit-policy plugin (whether now is safe); none means always.
    #[serde(default)]
    pub commit: Option<StepSpec>,
    #[serde(default)]
    pub lifecycle: LifecycleSettings,
    /// What survives every compaction verbatim, and how much of it (see `crate::pins`).
    #[serde(default)]
    pub pins: crate::pins::PinSettings,
    /// Where this policy came from, for messages.
    #[serde(skip)]
    pub source: String,
    #[serde(skip)]
    text: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompactionSettings {
    /// Entries at the end holding this many tokens stay verbatim…
    pub keep_recent_tokens: u64,
    /// …but never more than this fraction of the context, so small sessions still compact.
    pub keep_recent_at_most: f64,
    pub target_ratio: f64,
    /// The context a compaction leaves, in tokens: a target the checkpoint, placeholders and
    /// verbatim tail share, filled by value, and a ceiling the result is held to (outputs
    /// clipped, then the oldest history dropped) or reported `degraded` with what takes the
    /// room. None: the target is `target_ratio` of the context.
    pub budget_tokens: Option<u64>,
    /// The whole chain's time budget; untrusted steps are skipped once it is spent.
    pub chain_timeout_ms: u64,
    /// A plugin malfunctioning this many times in a row is skipped for `breaker_cooldown_ms`.
    pub breaker_failures: u32,
    pub breaker_cooldown_ms: u64,
    /// Refuse a model-written summary or checkpoint that the host's fact-check flags (a path,
    /// command, identifier, URL or number found nowhere in the history it replaces, or an item
    /// called pending that the history shows finished): the chain moves on to its next step, as
    /// after a commit-policy rejection. Off by default: the flags are only recorded.
    pub reject_unverified: bool,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            keep_recent_tokens: 20_000,
            keep_recent_at_most: 0.25,
            target_ratio: 0.5,
            budget_tokens: None,
            chain_timeout_ms: 180_000,
            breaker_failures: 3,
            breaker_cooldown_ms: 300_000,
            reject_unverified: false,
        }
    }
}

/// One stage of a compaction pipeline: a fallback chain of its own, run on what the stages
/// before it left, and only while that is still above the target.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    pub name: Spanned<String>,
    pub chain: Vec<StepSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    pub plugin: Spanned<String>,
    #[serde(default)]
    pub grants: Vec<Capability>,
    #[serde(default = "default_memory_mib")]
    pub memory_mib: Spanned<u64>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: Spanned<u64>,
    /// The plugin's config, with where it is written (checked against the plugin's
    /// `config_schema` when the policy is checked).
    #[serde(default = "default_config")]
    pub config: Spanned<toml::Table>,
}

fn default_config() -> Spanned<toml::Table> {
    Spanned::new(0..0, toml::Table::new())
}

fn default_memory_mib() -> Spanned<u64> {
    Spanned::new(0..0, 128)
}

fn default_timeout_ms() -> Spanned<u64> {
    Spanned::new(0..0, 10_000)
}

impl Policy {
    pub fn default_policy() -> Self {
        Policy::parse(DEFAULT_POLICY, "<embedded default policy>").expect("the embedded default policy is valid")
    }

    /// Parses and checks a policy; `source` (usually the file path) prefixes every error.
    pub fn parse(text: &str, source: &str) -> Result<Self> {
        let mut policy: Policy = toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => anyhow::anyhow!("{}: {}", at(text, source, span), e.message().trim_end()),
            None => anyhow::anyhow!("{source}: {}", e.to_string().trim_end()),
        })?;
        policy.source = source.to_string();
        policy.text = text.to_string();
        for (field, ratio) in [("target_ratio", policy.compaction.target_ratio), ("keep_recent_at_most", policy.compaction.keep_recent_at_most)] {
            if !(ratio > 0.0 && ratio < 1.0) {
                bail!("{source}: compaction.{field} must be between 0 and 1 (exclusive), got {ratio}");
            }
        }
        let headroom = policy.lifecycle.min_headroom_ratio;
        if !(0.0..1.0).contains(&headroom) {
            bail!("{source}: lifecycle.min_headroom_ratio must be at least 0 and below 1, got {headroom}");
        }
        let settings = &policy.compaction;
        if settings.budget_tokens == Some(0) {
            bail!("{source}: compaction.budget_tokens must be at least 1");
        }
        if settings.chain_timeout_ms == 0 || settings.breaker_failures == 0 {
            bail!("{source}: compaction.chain_timeout_ms and compaction.breaker_failures must be at least 1");
        }
        policy.check_stages()?;
        policy.pins.compile(|span| at(text, source, span))?;
        let staged = policy.stage.iter().flat_map(|stage| &stage.chain);
        for step in policy.chain.iter().chain(staged).chain(&policy.handover).chain(&policy.trigger).chain(&policy.commit) {
            let memory = *step.memory_mib.get_ref();
            if memory == 0 || memory > MAX_MEMORY_MIB {
                bail!("{}: memory_mib must be 1..={MAX_MEMORY_MIB}, got {memory}", policy.at(step.memory_mib.span()));
            }
            let timeout = *step.timeout_ms.get_ref();
            if timeout == 0 || timeout > MAX_TIMEOUT_MS {
                bail!("{}: timeout_ms must be 1..={MAX_TIMEOUT_MS}, got {timeout}", policy.at(step.timeout_ms.span()));
            }
        }
        Ok(policy)
    }

    /// The compaction pipeline as `(stage name, its chain)`: a `[[chain]]` is one stage.
    pub fn stages(&self) -> Vec<(&str, &[StepSpec])> {
        if self.stage.is_empty() {
            vec![("compact", &self.chain[..])]
        } else {
            self.stage.iter().map(|stage| (stage.name.get_ref().as_str(), &stage.chain[..])).collect()
        }
    }

    fn check_stages(&self) -> Result<()> {
        if let (Some(stage), false) = (self.stage.first(), self.chain.is_empty()) {
            bail!("{}: a policy has either a [[chain]] or [[stage]]s, not both (put the chain in a stage)", self.at(stage.name.span()));
        }
        let mut names = std::collections::HashSet::new();
        for (n, stage) in self.stage.iter().enumerate() {
            let at = self.at(stage.name.span());
            let name = stage.name.get_ref();
            if name.trim().is_empty() || !names.insert(name) {
                bail!("{at}: each stage needs a name of its own, got {name:?}");
            }
            if stage.chain.is_empty() {
                bail!("{at}: stage `{name}` has no [[stage.chain]] step");
            }
            let closing = stage.chain.iter().find(|step| step.plugin.get_ref() == crate::chain::LAST_RESORT);
            if let Some(step) = closing.filter(|_| n + 1 < self.stage.len()) {
                bail!("{}: `last-resort` ends the last stage; in stage `{name}` it would leave nothing for the stages after it", self.at(step.plugin.span()));
            }
        }
        Ok(())
    }

    /// `file:line:column` for a byte span of the policy text.
    pub fn at(&self, span: Range<usize>) -> String {
        at(&self.text, &self.source, span)
    }
}

impl Policy {
    /// `file:line:column` of the key `path` leads to inside a step's config, as near as the
    /// text shows it (else of the config, else of the step's plugin).
    pub fn config_at(&self, spec: &StepSpec, path: &[String]) -> String {
        let span = spec.config.span();
        if span.end == 0 || span.end > self.text.len() {
            return self.at(spec.plugin.span());
        }
        // A `[chain.config]` table's span is its header: its keys follow, up to the next header.
        let end = match self.text[span.end..].find("\n[") {
            Some(next) if self.text[span.start..span.end].trim_start().starts_with('[') => span.end + next,
            None if self.text[span.start..span.end].trim_start().starts_with('[') => self.text.len(),
            _ => span.end,
        };
        let mut from = span.start;
        for key in path.iter().filter(|key| key.parse::<usize>().is_err()) {
            match find_key(&self.text[from..end], key) {
                Some(offset) => from += offset,
                None => break,
            }
        }
        self.at(from..from)
    }
}

/// Where `key` is written as a TOML key in `text` (bare or quoted, before `=` or `.`).
fn find_key(text: &str, key: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    text.match_indices(key).map(|(i, _)| i).find(|&i| {
        let before = text[..i].trim_end_matches(['"', '\'']);
        let boundary = before.chars().next_back().is_none_or(|c| c.is_whitespace() || matches!(c, '{' | ',' | '.' | '['));
        let after = text[i + key.len()..].trim_start_matches(['"', '\'']).trim_start();
        let quoted_ok = i.checked_sub(1).is_none_or(|j| !bytes[j].is_ascii_alphanumeric() && bytes[j] != b'_' && bytes[j] != b'-');
        boundary && quoted_ok && (after.starts_with('=') || after.starts_with('.') || after.starts_with(']'))
    })
}

/// `source:line:column` of a byte span of `text` (columns count bytes, as TOML's errors do).
fn at(text: &str, source: &str, span: Range<usize>) -> String {
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    format!("{source}:{line}:{column}")
}

impl CompactionSettings {
    /// The verbatim tail's size for a context of `total` tokens.
    pub fn keep_recent(&self, total: u64) -> u64 {
        self.keep_recent_tokens.min((total as f64 * self.keep_recent_at_most) as u64)
    }

    pub fn target(&self, total: u64) -> u64 {
        (total as f64 * self.target_ratio) as u64
    }

    pub fn chain_deadline(&self) -> std::time::Instant {
        std::time::Instant::now() + Duration::from_millis(self.chain_timeout_ms)
    }

    pub fn breaker(&self) -> BreakerSettings {
        BreakerSettings { failures: self.breaker_failures, cooldown: Duration::from_millis(self.breaker_cooldown_ms) }
    }
}

impl StepSpec {
    pub fn grants(&self) -> Grants {
        Grants::new(self.grants.iter().copied())
    }

    pub fn limits(&self) -> StepLimits {
        StepLimits { memory_bytes: (*self.memory_mib.get_ref() as usize) << 20, timeout: Duration::from_millis(*self.timeout_ms.get_ref()) }
    }

    /// The plugin's config as the JSON text plugins receive.
    pub fn config_json(&self) -> String {
        if self.config.get_ref().is_empty() {
            String::new()
        } else {
            serde_json::to_string(self.config.get_ref()).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_default_parses() {
        let policy = Policy::default_policy();
        let stages = policy.stages();
        assert_eq!(stages.iter().map(|(name, _)| *name).collect::<Vec<_>>(), ["offload", "summarize"]);
        assert_eq!(stages[0].1[0].plugin.get_ref(), "shake-elide");
        assert!(stages[0].1[0].grants().has(Capability::ArchiveWrite));
    }

    #[test]
    fn config_keys_are_located_inline_in_a_table_and_nested() {
        let path = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        let inline = Policy::parse("[[chain]]\nplugin = \"x\"\nconfig = { tokens = 1, min_tokens = 2 }\n", "p.toml").unwrap();
        // `min_tokens` contains `tokens`, which is not its key.
        assert_eq!(inline.config_at(&inline.chain[0], &path(&["min_tokens"])), "p.toml:3:24");
        assert_eq!(inline.config_at(&inline.chain[0], &path(&["tokens"])), "p.toml:3:12");
        assert_eq!(inline.config_at(&inline.chain[0], &path(&["absent"])), "p.toml:3:10", "else the config itself");

        let table = "[[chain]]\nplugin = \"x\"\n[chain.config]\nlimits = { soft = 1, hard = 2 }\n\"quoted key\" = 3\n[[chain]]\nplugin = \"y\"\n";
        let table = Policy::parse(table, "p.toml").unwrap();
        assert_eq!(table.config_at(&table.chain[0], &path(&["limits", "hard"])), "p.toml:4:22");
        assert_eq!(table.config_at(&table.chain[0], &path(&["quoted key"])), "p.toml:5:2");
        assert_eq!(table.config_at(&table.chain[1], &path(&["limits"])), "p.toml:7:10", "no config: the step's plugin");
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let err = Policy::parse("[[chain]]\nplugin = \"x\"\ncolour = 1\n", "p.toml").unwrap_err().to_string();
        assert!(err.starts_with("p.toml:3:1: unknown field `colour`"), "{err}");
        let err = Policy::parse("[[chain]\nplugin = \"x\"\n", "p.toml").unwrap_err().to_string();
        assert!(err.starts_with("p.toml:1:"), "a syntax error names its line and column too: {err}");

        let err = Policy::parse("[[chain]]\nplugin = \"x\"\nmemory_mib = 0\n", "p.toml").unwrap_err().to_string();
        assert!(err.starts_with("p.toml:3:14: memory_mib"), "{err}");

        let err = Policy::parse("[[chain]]\nplugin = \"x\"\ngrants = [\"disk\"]\n", "p.toml").unwrap_err().to_string();
        assert!(err.starts_with("p.toml:3:11: unknown variant `disk`"), "{err}");

        let both = "[[chain]]\nplugin = \"a\"\n[[stage]]\nname = \"s\"\n[[stage.chain]]\nplugin = \"b\"\n";
        let err = Policy::parse(both, "p.toml").unwrap_err().to_string();
        assert!(err.starts_with("p.toml:4:8: a policy has either a [[chain]] or [[stage]]s"), "{err}");
        let early = "[[stage]]\nname = \"one\"\n[[stage.chain]]\nplugin = \"last-resort\"\n[[stage]]\nname = \"two\"\n[[stage.chain]]\nplugin = \"b\"\n";
        let err = Policy::parse(early, "p.toml").unwrap_err().to_string();
        assert!(err.starts_with("p.toml:4:10: `last-resort` ends the last stage"), "{err}");
        let empty = "[[stage]]\nname = \"one\"\nchain = []\n";
        assert!(Policy::parse(empty, "p.toml").unwrap_err().to_string().starts_with("p.toml:2:8: stage `one` has no"));
        let twice = "[[stage]]\nname = \"one\"\nchain = [{ plugin = \"a\" }]\n[[stage]]\nname = \"one\"\nchain = [{ plugin = \"b\" }]\n";
        assert!(Policy::parse(twice, "p.toml").unwrap_err().to_string().contains("each stage needs a name of its own"));
    }
}
