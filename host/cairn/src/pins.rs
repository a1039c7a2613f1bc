//! Pins: entries that survive every compaction verbatim. An entry is pinned by the operator's
//! id (`cairn pin`, recorded as an event), by the operator's marker in a message ([`MARKER`]),
//! or by a `[pins]` rule of the policy (tool names, text patterns, files the agent read). Pins
//! count against the policy's budget; one that would not fit is refused, and the refusal is
//! said in the record, never silent. The host carries pinned entries through every outcome
//! (`chain::invariants`), so a strategy need not know about them.

use std::collections::{BTreeSet, HashMap, HashSet};

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use crate::storage::ConversationStore;
use crate::tokenizer::Tokenizer;
use crate::transcript::{Entry, Origin, Part, Role, Transcript};

/// The operator's marker: a message of theirs containing this word is pinned.
pub const MARKER: &str = "!pin";

/// The `[pins]` section of a policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PinSettings {
    /// The most tokens pinned entries may hold together; a pin past it is refused.
    pub budget_tokens: u64,
    /// Tool names whose calls and results are pinned.
    pub tools: Vec<String>,
    /// Regular expressions: an operator or agent message whose text matches is pinned.
    pub patterns: Vec<Spanned<String>>,
    /// File names (`CLAUDE.md`, `AGENTS.md`): a tool call naming such a file in its
    /// arguments, and its result, are pinned.
    pub files: Vec<String>,
    #[serde(skip)]
    compiled: Vec<regex::Regex>,
}

impl Default for PinSettings {
    fn default() -> Self {
        PinSettings { budget_tokens: 16_000, tools: Vec::new(), patterns: Vec::new(), files: Vec::new(), compiled: Vec::new() }
    }
}

impl PinSettings {
    /// Compiles the patterns; an invalid one is named by `at` (its `file:line:column`).
    pub fn compile(&mut self, at: impl Fn(std::ops::Range<usize>) -> String) -> Result<()> {
        self.compiled =
            self.patterns.iter().map(|p| regex::Regex::new(p.get_ref()).map_err(|e| anyhow::anyhow!("{}: pins.patterns: not a regular expression: {e}", at(p.span())))).collect::<Result<_>>()?;
        Ok(())
    }
}

/// What a run pins, and what it had to refuse.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Ids pinned, in context order.
    pub pinned: Vec<String>,
    /// One line per refused pin: which entry, why.
    pub refused: Vec<String>,
}

/// Why an entry is pinned (explicit pins are weighed first against the budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reason {
    Operator,
    Marker,
    Rule,
}

impl Reason {
    fn word(self) -> &'static str {
        match self {
            Reason::Operator => "pinned by id",
            Reason::Marker => "pinned by the operator's marker",
            Reason::Rule => "pinned by a [pins] rule",
        }
    }
}

/// Pins `entries` in place: explicit `ids`, the operator's marker, then the policy's rules,
/// each within the budget. A tool call and its results are pinned together (a result without
/// its call would break the pairing providers require). Entries already marked pinned by the
/// harness stay pinned and count against the budget first.
pub fn apply(entries: &mut [Entry], ids: &BTreeSet<String>, settings: &PinSettings) -> Resolved {
    let mut wanted: Vec<(usize, Reason)> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let reason = if ids.contains(&entry.id) {
            Some(Reason::Operator)
        } else if is_marked(entry) {
            Some(Reason::Marker)
        } else if settings.matches(entry) {
            Some(Reason::Rule)
        } else {
            None
        };
        if let Some(reason) = reason.filter(|_| !entry.pinned) {
            wanted.push((i, reason));
        }
    }
    wanted.sort_by_key(|(i, reason)| (*reason, *i));
    let groups = pairing_groups(entries);
    let mut used: u64 = entries.iter().filter(|e| e.pinned).map(|e| e.tokens as u64).sum();
    let mut resolved = Resolved::default();
    let mut taken: HashSet<usize> = HashSet::new();
    for (i, reason) in wanted {
        if taken.contains(&i) {
            continue;
        }
        let group: Vec<usize> = groups.get(&i).cloned().unwrap_or_else(|| vec![i]);
        let cost: u64 = group.iter().filter(|&&g| !entries[g].pinned && !taken.contains(&g)).map(|&g| entries[g].tokens as u64).sum();
        if used + cost > settings.budget_tokens {
            resolved.refused.push(format!(
                "entry {} ({}, {cost} tokens with its tool pairs) is not pinned: pins would hold {} tokens, over the pins budget of {} ([pins] budget_tokens)",
                entries[i].id,
                reason.word(),
                used + cost,
                settings.budget_tokens
            ));
            continue;
        }
        used += cost;
        taken.extend(group);
    }
    for (i, entry) in entries.iter_mut().enumerate() {
        if taken.contains(&i) {
            entry.pinned = true;
        }
        if entry.pinned {
            resolved.pinned.push(entry.id.clone());
        }
    }
    resolved
}

/// Records the operator's pins of `ids` in `store`, checked against the budget of `settings`
/// with the conversation's entries counted by `tokenizer`; answers the ids newly pinned (one
/// pinned already is not recorded again). The one path `cairn pin`, the harness API and the
/// page take.
pub fn pin(store: &mut ConversationStore, tokenizer: &Tokenizer, ids: &[String], settings: &PinSettings) -> Result<Vec<String>> {
    let already = store.pinned_ids();
    let new: Vec<String> = ids.iter().filter(|id| !already.contains(*id)).cloned().collect();
    let mut context = Transcript::new(store.context()?);
    tokenizer.count_transcript(&mut context);
    check_request(&context.entries, &already, &new, settings)?;
    if !new.is_empty() {
        store.record_pins(new.clone(), true)?;
    }
    Ok(new)
}

/// Records the operator's unpinning of `ids`; an id that is not pinned is refused, naming
/// those that are, and nothing is recorded.
pub fn unpin(store: &mut ConversationStore, ids: &[String]) -> Result<()> {
    let pinned = store.pinned_ids();
    let not: Vec<&str> = ids.iter().filter(|id| !pinned.contains(*id)).map(String::as_str).collect();
    if !not.is_empty() {
        let now = if pinned.is_empty() { "none".to_string() } else { pinned.into_iter().collect::<Vec<_>>().join(", ") };
        return Err(crate::error_kinds::Refused(format!("not pinned: {} (pinned now: {now})", crate::echo::inputs(&not, 5))).into());
    }
    store.record_pins(ids.to_vec(), false)
}

/// Checks an operator's request to pin `ids` against what is pinned already and the budget:
/// the error names the entries and the figures. `entries` is the conversation as recorded.
pub fn check_request(entries: &[Entry], already: &BTreeSet<String>, ids: &[String], settings: &PinSettings) -> Result<()> {
    let by_id: HashMap<&str, &Entry> = entries.iter().map(|e| (e.id.as_str(), e)).collect();
    for id in ids {
        if !by_id.contains_key(id.as_str()) {
            return Err(crate::error_kinds::NotFound(format!("no entry {} in this conversation's record (pin ids as `cairn show` or the transcript names them)", crate::echo::input(id))).into());
        }
    }
    let all: BTreeSet<String> = already.iter().chain(ids).cloned().collect();
    let mut pinned: Vec<Entry> = entries.to_vec();
    let resolved = apply(&mut pinned, &all, &PinSettings { budget_tokens: settings.budget_tokens, ..PinSettings::default() });
    if let Some(refused) = resolved.refused.iter().find(|r| ids.iter().any(|id| r.starts_with(&format!("entry {id} ")))) {
        return Err(crate::error_kinds::Refused(format!("pin refused: {refused}")).into());
    }
    Ok(())
}

fn is_marked(entry: &Entry) -> bool {
    entry.role == Role::User && entry.origin == Origin::Operator && entry.parts.iter().any(|p| matches!(p, Part::Text { text } if text.split_whitespace().any(|w| w == MARKER)))
}

impl PinSettings {
    fn matches(&self, entry: &Entry) -> bool {
        let calls = entry.parts.iter().filter_map(|p| match p {
            Part::ToolCall { name, args, .. } => Some((name.as_str(), args.as_str())),
            _ => None,
        });
        for (name, args) in calls {
            if self.tools.iter().any(|t| t == name) || self.files.iter().any(|f| names_file(args, f)) {
                return true;
            }
        }
        let spoken = matches!(entry.origin, Origin::Operator | Origin::Agent) && entry.role != Role::Tool;
        spoken && !self.compiled.is_empty() && entry.parts.iter().any(|p| matches!(p, Part::Text { text } if self.compiled.iter().any(|r| r.is_match(text))))
    }
}

/// Whether a call's JSON arguments name `file`: a path ending in it (`/repo/CLAUDE.md`).
fn names_file(args: &str, file: &str) -> bool {
    args.match_indices(file).any(|(at, _)| {
        let before = args[..at].chars().next_back();
        let after = args[at + file.len()..].chars().next();
        before.is_none_or(|c| matches!(c, '/' | '\\' | '"' | ' ' | '\'')) && after.is_none_or(|c| matches!(c, '"' | ' ' | '\'' | ','))
    })
}

/// For each entry with tool calls or results, every entry of its call-and-results group.
fn pairing_groups(entries: &[Entry]) -> HashMap<usize, Vec<usize>> {
    let mut caller: HashMap<&str, usize> = HashMap::new();
    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        for id in entry.tool_call_ids() {
            caller.insert(id, i);
            groups.entry(i).or_insert_with(|| vec![i]);
        }
        for id in entry.tool_result_ids() {
            if let Some(&call) = caller.get(id) {
                let group = groups.entry(call).or_insert_with(|| vec![call]);
                if !group.contains(&i) {
                    group.push(i);
                }
            }
        }
    }
    let mut by_member = HashMap::new();
    for group in groups.into_values() {
        for &member in &group {
            by_member.insert(member, group.clone());
        }
    }
    by_member
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, call: &str, name: &str, args: &str) -> Entry {
        let mut e = Entry::text(id, Role::Assistant, Origin::Agent, "");
        e.parts = vec![Part::ToolCall { id: call.into(), name: name.into(), args: args.into() }].into();
        e.tokens = 10;
        e
    }

    fn result(id: &str, call: &str, text: &str, tokens: u32) -> Entry {
        let mut e = Entry::text(id, Role::Tool, Origin::Tool, "");
        e.parts = vec![Part::ToolResult { call_id: call.into(), content: text.into(), is_error: false, elided: None }].into();
        e.tokens = tokens;
        e
    }

    fn said(id: &str, text: &str) -> Entry {
        let mut e = Entry::text(id, Role::User, Origin::Operator, text);
        e.tokens = 5;
        e
    }

    fn settings(text: &str) -> PinSettings {
        let mut s: PinSettings = toml::from_str(text).unwrap();
        s.compile(|r| format!("{r:?}")).unwrap();
        s
    }

    #[test]
    fn ids_markers_and_rules_pin_and_a_call_brings_its_result() {
        let mut entries = vec![
            said("u1", "!pin never push to main"),
            call("a1", "c1", "read", r#"{"path":"/repo/CLAUDE.md"}"#),
            result("t1", "c1", "rules", 50),
            said("u2", "the deadline is friday"),
            call("a2", "c2", "bash", r#"{"cmd":"ls"}"#),
            result("t2", "c2", "files", 20),
            said("u3", "hello !pinned is not the marker"),
        ];
        let ids = BTreeSet::from(["t2".to_string()]);
        let resolved = apply(&mut entries, &ids, &settings("files = [\"CLAUDE.md\"]\npatterns = [\"(?i)deadline\"]"));
        assert_eq!(resolved.pinned, ["u1", "a1", "t1", "u2", "a2", "t2"]);
        assert!(resolved.refused.is_empty());
        assert!(!entries[6].pinned);
    }

    #[test]
    fn a_pin_over_the_budget_is_refused_with_the_figures() {
        let mut entries = vec![said("u1", "!pin keep"), call("a1", "c1", "read", r#"{"path":"AGENTS.md"}"#), result("t1", "c1", "big", 500)];
        let resolved = apply(&mut entries, &BTreeSet::new(), &settings("budget_tokens = 100\nfiles = [\"AGENTS.md\"]"));
        assert_eq!(resolved.pinned, ["u1"]);
        assert_eq!(resolved.refused.len(), 1);
        assert!(resolved.refused[0].contains("entry a1") && resolved.refused[0].contains("over the pins budget of 100"), "{:?}", resolved.refused);
        assert!(!entries[2].pinned, "the refused group stays unpinned as a whole");
    }

    #[test]
    fn a_request_for_an_unknown_or_too_large_entry_is_refused() {
        let entries = vec![said("u1", "a"), result("t1", "c1", "big", 500)];
        let settings = settings("budget_tokens = 100");
        assert!(check_request(&entries, &BTreeSet::new(), &["u1".into()], &settings).is_ok());
        let err = check_request(&entries, &BTreeSet::new(), &["nope".into()], &settings).unwrap_err().to_string();
        assert!(err.contains("no entry \"nope\""), "{err}");
        let err = check_request(&entries, &BTreeSet::new(), &["t1".into()], &settings).unwrap_err().to_string();
        assert!(err.starts_with("pin refused: entry t1") && err.contains("budget of 100"), "{err}");
    }

    #[test]
    fn a_bad_pattern_names_its_place() {
        let mut s: PinSettings = toml::from_str("patterns = [\"(unclosed\"]").unwrap();
        let err = s.compile(|r| format!("p.toml@{}", r.start)).unwrap_err().to_string();
        assert!(err.starts_with("p.toml@12: pins.patterns: not a regular expression"), "{err}");
    }
}
