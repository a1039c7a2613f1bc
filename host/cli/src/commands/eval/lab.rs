//! What every scenario needs: a host, the policy under test, a scratch home, the base
//! sessions, and tool work to grow a session between compactions.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{formats, sample, Entry, Origin, Part, Role, Transcript};
use cairn::{Cairn, CheckedPolicy, CompactionReport, Lifecycle};

use crate::setup;

pub struct Lab {
    pub cairn: Cairn,
    pub policy: CheckedPolicy,
    pub home: Home,
    scratch: tempfile::TempDir,
    plugin_dirs: Vec<PathBuf>,
    policy_path: Option<PathBuf>,
    transcripts: Option<PathBuf>,
    /// `cairn eval --budget`: every compaction is held to it.
    pub budget: Option<u64>,
}

impl Lab {
    pub fn new(plugin_dirs: &[PathBuf], policy_path: Option<&Path>, transcripts: Option<PathBuf>, budget: Option<u64>) -> Result<Self> {
        let (cairn, policy) = setup::host_and_policy(plugin_dirs, policy_path)?;
        let policy = match budget {
            Some(budget) => policy.with_budget(budget),
            None => policy,
        };
        let scratch = tempfile::Builder::new().prefix("cairn-eval-").tempdir()?;
        let home = Home::open(&scratch.path().join("home"))?;
        Ok(Lab { cairn, policy, home, scratch, plugin_dirs: plugin_dirs.to_vec(), policy_path: policy_path.map(Path::to_path_buf), transcripts, budget })
    }

    /// A lifecycle on the scratch home with the same plugins and policy (its own host: a
    /// checked policy belongs to the host that checked it).
    pub fn lifecycle(&self) -> Result<Lifecycle> {
        let (cairn, policy) = setup::host_and_policy(&self.plugin_dirs, self.policy_path.as_deref())?;
        let policy = match self.budget {
            Some(budget) => policy.with_budget(budget),
            None => policy,
        };
        Ok(Lifecycle::new(cairn, Home::open(&self.scratch.path().join("home"))?, policy))
    }

    pub fn sessions_name(&self) -> String {
        self.transcripts.as_ref().map_or_else(|| "generated coding session".into(), |d| d.display().to_string())
    }

    /// A recorded session of `kind` (`pi`, `openai-chat`), the first by name; the generated
    /// session without `--transcripts`.
    pub fn session(&self, kind: &str) -> Result<(String, Transcript)> {
        let Some(dir) = &self.transcripts else {
            return Ok(("generated".into(), sample::coding_session(24)));
        };
        let dir = dir.join(kind);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
        files.sort();
        let file = files.first().with_context(|| format!("no sessions in {}", dir.display()))?;
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {name}"))?;
        let (mut t, _) = formats::parse(&text, &name)?;
        // A session recorded as it ended on a call: the scenarios add work after it.
        while t.entries.last().is_some_and(|e| e.tool_call_ids().next().is_some()) {
            t.entries.pop();
        }
        Ok((file.file_name().unwrap_or_default().to_string_lossy().into_owned(), t))
    }

    /// One compaction of `t` in conversation `key`, recorded in the scratch home.
    pub fn compact(&self, key: &str, t: &Transcript) -> Result<CompactionReport> {
        let mut store = self.home.conversation(&ConversationKey::parse(key)?)?;
        self.cairn.compact(&self.policy, &mut store, t, key)
    }
}

/// All the text the model reads in `t`.
pub fn text(t: &Transcript) -> String {
    t.entries.iter().map(|e| e.model_text()).collect::<Vec<_>>().join("\n")
}

/// `n` rounds of tool work (a call and a ~1,500-token output each), ids unique per `tag`.
pub fn tool_work(tag: &str, n: usize) -> Vec<Entry> {
    let mut entries = Vec::new();
    for i in 0..n {
        let call = format!("{tag}-call-{i}");
        let path = format!("src/module_{i}.py");
        entries.push(Entry {
            parts: vec![Part::Text { text: format!("Reading {path}.") }, Part::ToolCall { id: call.clone(), name: "read".into(), args: format!(r#"{{"path":"{path}"}}"#) }].into(),
            ..Entry::text(format!("{tag}-work-{i}"), Role::Assistant, Origin::Agent, "")
        });
        let body: String = (0..120).map(|l| format!("    def handler_{i}_{l}(self, request):  # {tag}\n        return self.dispatch(request, {l})\n")).collect();
        entries.push(tool_result(&format!("{tag}-output-{i}"), &call, format!("class Module{i}:\n{body}")));
    }
    entries
}

/// Replaces the content of `entry`'s tool result (a probe planted in tool work).
pub fn plant(entry: &mut Entry, content: String) {
    if let Some(Part::ToolResult { content: c, .. }) = entry.parts.first_mut() {
        *c = content;
    }
}

pub fn tool_result(id: &str, call: &str, content: String) -> Entry {
    Entry { parts: vec![Part::ToolResult { call_id: call.into(), content, is_error: false, elided: None }].into(), ..Entry::text(id, Role::Tool, Origin::Tool, "") }
}

/// `t` with `more` appended, turns renumbered.
pub fn grown(t: &Transcript, more: Vec<Entry>) -> Transcript {
    let mut out = t.clone();
    out.entries.extend(more);
    out.number_turns();
    out
}

/// The first operator message of `t`, with `extra` appended to it.
pub fn with_first_request(mut t: Transcript, extra: &str) -> Transcript {
    if let Some(entry) = t.entries.iter_mut().find(|e| e.role == Role::User && e.origin == Origin::Operator) {
        entry.parts.push(Part::Text { text: extra.to_string() });
    }
    t
}

/// Who committed a compaction, for a scorecard line: "shake-elide@0.1.0", "last resort".
pub fn committed_by(report: &CompactionReport) -> String {
    let steps: Vec<String> = report.steps.iter().map(|s| format!("{} {}{}", s.plugin, s.outcome, s.message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())).collect();
    let by = match (&report.committed_by, report.degraded) {
        (_, true) => "the last resort (oldest history dropped)".to_string(),
        (Some(by), false) => by.clone(),
        (None, false) => "nothing".into(),
    };
    format!("{by}; steps: {}", steps.join(", "))
}
