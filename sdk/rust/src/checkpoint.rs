//! The continuation checkpoint (`wit/checkpoint/2.schema.json`) as a Rust type, a
//! deterministic extraction of it from entries (no model needed), and a markdown rendering.
//!
//! Extraction rules, in short: operator messages are the source of intent and are quoted
//! verbatim; tool calls give the files read and modified and the test/build runs; assistant
//! text gives milestones, decisions and rejected approaches. Tool errors that were not followed
//! by a successful retry of the same call become pending work ("Unresolved error …"); failed
//! test/build runs go to `verification.failed` instead, so nothing is listed twice.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use serde::{Deserialize, Serialize};

use crate::types::{Entry, Part, Role, ToolResult};
use crate::{clip_ellipsis, is_operator_message, log_warn, message_text};
use cairn_rules::intent::{is_constraint, sentences};

/// The JSON Schema every checkpoint must satisfy (the host validates against it).
pub const SCHEMA: &str = include_str!("../../../wit/checkpoint/2.schema.json");

/// The schema's keys, in order.
pub const FIELDS: [&str; 11] = [
    "task_objective",
    "negative_constraints",
    "accepted_decisions",
    "rejected_hypotheses",
    "completed_milestones",
    "pending_work",
    "verification",
    "external_artifacts",
    "next_immediate_action",
    "files_read",
    "files_modified",
];

/// Typed continuation state. All keys are required and no others are allowed, as in the schema.
#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The operator's first request, verbatim ([`cairn_rules::intent::root_objective`]).
    /// Anchored: once a conversation has one, the host keeps it unchanged in every later
    /// checkpoint, whatever a strategy writes; `task_objective` is the current request.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root_objective: String,
    pub task_objective: String,
    pub negative_constraints: Vec<String>,
    pub accepted_decisions: Vec<String>,
    pub rejected_hypotheses: Vec<RejectedHypothesis>,
    pub completed_milestones: Vec<String>,
    pub pending_work: Vec<String>,
    pub verification: Verification,
    pub external_artifacts: Vec<ExternalArtifact>,
    pub next_immediate_action: String,
    pub files_read: Vec<String>,
    pub files_modified: Vec<String>,
    /// The operator's rules besides prohibitions (those are `negative_constraints`):
    /// obligations, process and preferences, verbatim with the values they name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// What the operator stated with its values (amounts, dates, names, ids, paths, URLs), verbatim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<String>,
    /// The operator's statements of where the work stands (current task, failing cases, next step, blocked), verbatim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goal_state: Vec<String>,
    /// Decisions the operator stated ("New plan: …", "use Z instead"), verbatim; they stand above the agent's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operator_decisions: Vec<String>,
    /// Operator statements a later one on the same subject replaced: kept for the record, never
    /// shown as current.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<String>,
    /// The commands the agent ran, one per family (program and subcommand): the last
    /// invocation and its exit status where the output says it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRun>,
    /// What a budget left out of the context's rendering, by section: how many items.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub left_out: BTreeMap<String, u32>,
}

/// A family of commands (`cargo test`, `npm run`): its last invocation and exit status.
#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandRun {
    pub family: String,
    pub last: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i64>,
}

impl CommandRun {
    /// `cargo test -p x (exit 101)`: how the context shows it.
    pub fn shown(&self) -> String {
        match self.exit {
            Some(code) => format!("{} (exit {code})", self.last),
            None => self.last.clone(),
        }
    }

    /// The inverse of [`CommandRun::shown`].
    pub fn from_shown(text: &str) -> Self {
        let (last, exit) = match text.strip_suffix(')').and_then(|t| t.rsplit_once(" (exit ")) {
            Some((last, code)) if code.parse::<i64>().is_ok() => (last, code.parse().ok()),
            _ => (text, None),
        };
        CommandRun { family: command_family(last), last: last.to_string(), exit }
    }
}

/// An operator rule and its kind: `obligation`, `process` or `preference`.
#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub kind: String,
    pub text: String,
}

#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RejectedHypothesis {
    pub approach: String,
    pub reason: String,
}

#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    pub passed: Vec<String>,
    pub failed: Vec<String>,
    pub not_run: Vec<String>,
}

#[derive(Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExternalArtifact {
    pub name: String,
    pub uri: String,
}

impl Checkpoint {
    /// Compact JSON text, ready for `Outcome::checkpoint`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a checkpoint always serializes")
    }

    /// Every key with an empty value, pretty-printed: the shape to show a model.
    pub fn skeleton() -> String {
        serde_json::to_string_pretty(&Checkpoint::default()).expect("a checkpoint always serializes")
    }
}

/// Parses a checkpoint from a model reply: the JSON object alone, inside a ```json fence, or
/// surrounded by prose. Missing, extra or mistyped keys are errors.
pub fn parse(reply: &str) -> Result<Checkpoint, String> {
    let json = fenced(reply).unwrap_or(reply);
    let json = match (json.find('{'), json.rfind('}')) {
        (Some(start), Some(end)) if start < end => &json[start..=end],
        _ => return Err("the reply holds no JSON object".into()),
    };
    serde_json::from_str(json).map_err(|e| format!("the reply is not a valid checkpoint: {e}"))
}

/// The body of the first ``` fence, if the text has one.
fn fenced(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let body = &text[open + 3..];
    let body = &body[body.find('\n')? + 1..]; // skip the language tag
    Some(&body[..body.find("```").unwrap_or(body.len())])
}

/// The config of strategies that write a checkpoint by the model when the policy grants it, else
/// by deterministic extraction (`checkpoint-json`, `handover`). Read it with
/// [`parse_config`](crate::parse_config); the model-or-extraction switch is
/// [`ask_model_or_fallback`](crate::ask_model_or_fallback).
#[derive(Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointConfig {
    /// Tokens of operator text quoted verbatim by the deterministic extraction.
    pub operator_budget_tokens: u32,
    /// Reply budget of the model.
    pub max_tokens: u32,
    /// Tool output longer than this is clamped before the model sees it.
    pub clamp_chars: usize,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig { operator_budget_tokens: 4000, max_tokens: 4096, clamp_chars: 2000 }
    }
}

/// The previous checkpoint of a [`CompactRequest`](crate::types::CompactRequest), if it has a
/// valid one; an invalid one is logged and ignored.
pub fn previous(json: Option<&str>) -> Option<Checkpoint> {
    parse(json?).map_err(|e| log_warn(&format!("ignoring the previous checkpoint: {e}"))).ok()
}

/// `current` [`merge`]d onto `previous` when there is one.
pub fn carry_forward(previous: Option<&Checkpoint>, current: Checkpoint) -> Checkpoint {
    match previous {
        Some(previous) => merge(previous, current),
        None => current,
    }
}

/// Deterministic extraction; operator text is budgeted with the host's tokenizer.
pub fn extract(entries: &[Entry], token_budget: u32) -> Checkpoint {
    extract_with(entries, token_budget, &crate::count_tokens)
}

/// [`extract`] with the token counter passed in (native tests use an approximation).
///
/// `token_budget` bounds the operator text quoted verbatim: the objective (the last operator
/// request, after the latest longer one when it is short) comes first, then constraint
/// sentences, newest message first; what does not fit is left out.
pub fn extract_with(entries: &[Entry], token_budget: u32, count: &dyn Fn(&str) -> u32) -> Checkpoint {
    extract_onto(None, entries, 0, token_budget, count)
}

/// A later checkpoint, starting from `previous`, the one whose extraction read `entries` up to
/// and including the one with id `covered_through` (it should end a turn: no call waiting for
/// its result). Only the entries after it are read for what accumulates (statements, files,
/// runs, artifacts); operator intent and pending work are read where they are (every operator
/// message, the last agent text, the calls since the operator last spoke).
///
/// The result is [`carry_forward`] of [`extract_with`] on all of `entries`, within the bounds
/// each list keeps: a statement, run or artifact `previous` already dropped for space does not
/// come back, and artifacts keep `previous`'s order. When `covered_through` is not in
/// `entries`, that is what it computes.
pub fn extract_since(previous: &Checkpoint, entries: &[Entry], covered_through: &str, token_budget: u32, count: &dyn Fn(&str) -> u32) -> Checkpoint {
    match entries.iter().position(|e| e.id == covered_through) {
        Some(at) => merge(previous, extract_onto(Some(previous), entries, at + 1, token_budget, count)),
        None => carry_forward(Some(previous), extract_with(entries, token_budget, count)),
    }
}

/// The checkpoint of `entries` after `previous`: started from it when the host says which
/// entry it was made through (`previous_checkpoint_through`), so only what came after is read;
/// else extracted whole and carried forward.
pub fn update(previous: Option<&Checkpoint>, through: Option<&str>, entries: &[Entry], token_budget: u32) -> Checkpoint {
    match (previous, through) {
        (Some(previous), Some(through)) => extract_since(previous, entries, through, token_budget, &crate::count_tokens),
        _ => carry_forward(previous, extract(entries, token_budget)),
    }
}

/// The extraction of `entries`, reading what accumulates only from `entries[from..]`, after
/// what `earlier` holds (statements and runs are folded onto it; the caller merges the rest).
fn extract_onto(earlier: Option<&Checkpoint>, entries: &[Entry], from: usize, token_budget: u32, count: &dyn Fn(&str) -> u32) -> Checkpoint {
    let operator: Vec<String> = entries.iter().filter(|e| is_operator_message(e)).map(|e| message_text(e).trim().to_string()).filter(|t| !t.is_empty()).collect();
    let mut budget = token_budget;

    let requests = current_requests(&operator);
    let mut objective = match requests.as_slice() {
        [context, last] => format!("{context}\n\nLatest request: {last}"),
        [last] => last.to_string(),
        _ => String::new(),
    };
    let tokens = count(&objective);
    if tokens > budget {
        // The objective alone overflows: keep its start, proportionally.
        let keep = objective.chars().count() * budget as usize / tokens.max(1) as usize;
        objective = clip_ellipsis(&objective, keep.max(1));
    }
    budget = budget.saturating_sub(count(&objective));

    // The calls read: the new ones, and those since the operator last spoke (pending errors).
    let since = entries.iter().rposition(is_operator_message).unwrap_or(0);
    let first = since.min(from);
    let calls = Calls::new(&entries[first..]);
    let (files_read, files_modified) = calls.files(from - first);
    let mut pending: Vec<String> = requests.iter().flat_map(|r| request_items(r)).collect();
    let last_agent_text = entries.iter().rev().filter(|e| e.role == Role::Assistant).map(message_text).find(|t| !t.trim().is_empty());
    pending.extend(last_agent_text.as_deref().map(todo_lines).unwrap_or_default());
    pending.extend(calls.unresolved_errors(since - first));
    let pending = dedup(pending);

    // The latest request's first sentence that asks for something: not "Great.", not a prohibition.
    let said: Vec<&str> = requests.iter().rev().flat_map(|r| sentences(r)).collect();
    let next_immediate_action = match said.iter().find(|s| !is_acknowledgement(s) && !is_constraint(s)).or(said.first()) {
        Some(first) => clip_ellipsis(first, 300),
        None => pending.last().cloned().unwrap_or_default(),
    };
    let agent = agent_statements(&entries[from..], earlier);
    let mut cp = Checkpoint {
        root_objective: operator.first().map(|first| cairn_rules::intent::root_objective(first)).unwrap_or_default(),
        task_objective: objective,
        negative_constraints: Vec::new(),
        accepted_decisions: agent.decisions,
        rejected_hypotheses: agent.rejected,
        completed_milestones: agent.milestones,
        pending_work: pending,
        verification: calls.verification(from - first, earlier.map_or(&Verification::default(), |e| &e.verification)),
        commands: calls.commands(from - first, earlier.map_or(&[][..], |e| &e.commands)),
        external_artifacts: artifacts(&entries[from..]),
        next_immediate_action,
        files_read,
        files_modified,
        ..Default::default()
    };
    crate::ledger::extract(&mut cp, &operator, budget, count);
    cp
}

/// A previous checkpoint carried forward: history-like lists accumulate (previous first; all
/// constraints, the latest statements and artifacts), state-like fields take the current value
/// unless it is empty.
pub fn merge(previous: &Checkpoint, current: Checkpoint) -> Checkpoint {
    fn union<T: Clone + PartialEq>(old: &[T], new: Vec<T>, max: usize) -> Vec<T> {
        let mut out = old.to_vec();
        out.extend(new.into_iter().filter(|n| !old.contains(n)));
        latest(out, max)
    }
    fn fresh<T: Clone>(new: T, old: &T, empty: fn(&T) -> bool) -> T {
        if empty(&new) {
            old.clone()
        } else {
            new
        }
    }
    let files_modified = union(&previous.files_modified, current.files_modified.clone(), usize::MAX);
    let files_read = union(&previous.files_read, current.files_read.clone(), usize::MAX).into_iter().filter(|f| !files_modified.contains(f)).collect();
    let mut merged = Checkpoint {
        // The first request of the conversation is the previous checkpoint's, never a later one.
        root_objective: fresh(previous.root_objective.clone(), &current.root_objective, |s| s.is_empty()),
        task_objective: fresh(current.task_objective.clone(), &previous.task_objective, |s| s.is_empty()),
        accepted_decisions: union(&previous.accepted_decisions, current.accepted_decisions.clone(), MAX_STATEMENTS),
        rejected_hypotheses: union(&previous.rejected_hypotheses, current.rejected_hypotheses.clone(), MAX_STATEMENTS),
        completed_milestones: union(&previous.completed_milestones, current.completed_milestones.clone(), MAX_STATEMENTS),
        pending_work: fresh(current.pending_work.clone(), &previous.pending_work, |v| v.is_empty()),
        verification: fresh(current.verification.clone(), &previous.verification, |v| *v == Verification::default()),
        external_artifacts: union(&previous.external_artifacts, current.external_artifacts.clone(), MAX_ARTIFACTS),
        next_immediate_action: fresh(current.next_immediate_action.clone(), &previous.next_immediate_action, |s| s.is_empty()),
        files_read,
        files_modified,
        commands: latest(previous.commands.iter().filter(|p| !current.commands.iter().any(|c| c.family == p.family)).chain(&current.commands).cloned().collect(), MAX_COMMANDS),
        ..Default::default()
    };
    // Constraints, rules, facts, goal state and the operator's decisions: previous first, a
    // current statement superseding a previous one on its subject.
    crate::ledger::merge(previous, &current, &mut merged);
    merged
}

/// Compact markdown, one `##` section per non-empty field.
pub fn render(checkpoint: &Checkpoint) -> String {
    let mut out = String::new();
    let mut section = |title: &str, items: Vec<String>| {
        if !items.is_empty() {
            out.push_str(&format!("## {title}\n"));
            for item in &items {
                // Continuation lines are indented to stay inside their bullet.
                let lines: Vec<String> = item.lines().enumerate().map(|(n, l)| if n == 0 || l.is_empty() { l.to_string() } else { format!("  {l}") }).collect();
                out.push_str(&format!("- {}\n", lines.join("\n")));
            }
            out.push('\n');
        }
    };
    let cp = checkpoint;
    let v = &cp.verification;
    if cp.root_objective != cp.task_objective {
        section("Root objective (the operator's first request)", non_empty(&cp.root_objective));
    }
    section("Objective", non_empty(&cp.task_objective));
    section("Constraints (verbatim)", cp.negative_constraints.clone());
    section("Rules (verbatim)", cp.rules.iter().map(|r| r.text.clone()).collect());
    section("Facts", cp.facts.clone());
    section("Goal state", cp.goal_state.clone());
    section("Operator decisions", cp.operator_decisions.clone());
    section("Decisions", cp.accepted_decisions.clone());
    section("Rejected approaches", cp.rejected_hypotheses.iter().map(|r| format!("{} — {}", r.approach, r.reason)).collect());
    section("Done", cp.completed_milestones.clone());
    section("Pending", cp.pending_work.clone());
    let runs = [("passed", &v.passed), ("FAILED", &v.failed), ("not run", &v.not_run)];
    section("Verification", runs.iter().flat_map(|(label, items)| items.iter().map(move |i| format!("{label}: {i}"))).collect());
    section("Commands", cp.commands.iter().map(CommandRun::shown).collect());
    section("Files read", cp.files_read.clone());
    section("Files modified", cp.files_modified.clone());
    section("Artifacts", cp.external_artifacts.iter().map(|a| format!("{} <{}>", a.name, a.uri)).collect());
    section("Next action", non_empty(&cp.next_immediate_action));
    out.trim_end().to_string()
}

fn non_empty(text: &str) -> Vec<String> {
    Some(text.trim()).filter(|t| !t.is_empty()).map(String::from).into_iter().collect()
}

// ---- operator intent --------------------------------------------------------------------------

/// The requests the objective quotes: the last operator request, preceded by the latest one of
/// some length when the last is short ("yes, do it all" says little alone).
fn current_requests(operator: &[String]) -> Vec<&str> {
    const SHORT_WORDS: usize = 6;
    let Some((last, earlier)) = operator.split_last() else { return vec![] };
    let long = |m: &&String| m.split_whitespace().count() >= SHORT_WORDS;
    match earlier.iter().rev().find(long) {
        Some(context) if !long(&last) => vec![context, last],
        _ => vec![last],
    }
}

/// "Great.", "Thanks!", "OK, cool." — a short sentence of acknowledgement words only.
fn is_acknowledgement(sentence: &str) -> bool {
    const WORDS: &[&str] = &["great", "thanks", "thank", "you", "ok", "okay", "perfect", "nice", "yes", "cool", "good", "awesome", "sure", "alright", "excellent", "lgtm"];
    let words: Vec<String> = sentence.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    words.len() <= 3 && words.iter().all(|w| WORDS.contains(&w.as_str()))
}

/// The work items of a request: its list items if it has any, else the request itself.
fn request_items(request: &str) -> Vec<String> {
    let items: Vec<String> = request.lines().filter_map(strip_list_marker).map(|l| clip_ellipsis(l, 300)).collect();
    if !items.is_empty() {
        items
    } else if request.trim().is_empty() {
        vec![]
    } else {
        vec![clip_ellipsis(request.trim(), 300)]
    }
}

fn strip_list_marker(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
        return Some(rest.trim()).filter(|r| !r.is_empty());
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    let rest = &t[digits..];
    (digits > 0).then(|| rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "))).flatten().map(str::trim).filter(|r| !r.is_empty())
}

/// TODO and "next …" lines of an agent message; a "Next steps:" title takes the list below it.
fn todo_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_list = false;
    for (line, marks) in marked_lines(text, statement_markers()) {
        if in_list {
            if let Some(item) = strip_list_marker(line) {
                out.push(clip_ellipsis(item, 300));
                continue;
            }
            in_list = line.trim().is_empty();
            if in_list {
                continue;
            }
        }
        let bare = strip_bullet(line);
        if marks & TODO != 0 || (marks & NEXT != 0 && starts_with_word(&bare.to_lowercase(), "next")) {
            if bare.ends_with(':') || line.trim_start().starts_with('#') {
                in_list = true;
            } else {
                out.push(clip_ellipsis(bare, 300));
            }
        }
    }
    out
}

// ---- agent statements -------------------------------------------------------------------------

#[derive(Default)]
struct AgentStatements {
    milestones: Vec<String>,
    decisions: Vec<String>,
    rejected: Vec<RejectedHypothesis>,
}

const MILESTONE_WORDS: &[&str] = &["Done", "Fixed", "Implemented", "Added"];
/// The latest this many statements of each kind are kept.
const MAX_STATEMENTS: usize = 20;

markers! {
    /// What agent text is searched for, ASCII case-insensitively.
    STATEMENT_MARKERS {
        DECIDED_TO = "decided to", GOING_WITH = "going with", INSTEAD_OF = "instead of",
        // "instead of" alone mostly describes; with one of these it decides ("going with" too).
        I_LL = "i'll", I_WILL = "i will", WE_LL = "we'll", WE_WILL = "we will", LET_S = "let's", LET_ME = "let me",
        SWITCH = "switch", CHOSE = "chose", CHOOSE = "choose", PREFER = "prefer", DECID = "decid",
        // Rejections, in order of preference when a sentence has several.
        DOESNT_WORK = "doesn't work", DOESNT_WORK_Q = "doesn’t work", DOES_NOT_WORK = "does not work", DIDNT_WORK = "didn't work",
        DIDNT_WORK_Q = "didn’t work", WONT_WORK = "won't work", WONT_WORK_Q = "won’t work", WILL_NOT_WORK = "will not work",
        DOES_NOT_HELP = "does not help", DOESNT_HELP = "doesn't help", DIDNT_HELP = "didn't help",
        TODO = "todo", NEXT = "next",
    }
}
const DECIDES: u64 = DECIDED_TO | GOING_WITH;
const CHOICE_WORDS: u64 = I_LL | I_WILL | WE_LL | WE_WILL | LET_S | LET_ME | SWITCH | CHOSE | CHOOSE | PREFER | DECID | GOING_WITH;
const REJECTIONS: [u64; 11] = [DOESNT_WORK, DOESNT_WORK_Q, DOES_NOT_WORK, DIDNT_WORK, DIDNT_WORK_Q, WONT_WORK, WONT_WORK_Q, WILL_NOT_WORK, DOES_NOT_HELP, DOESNT_HELP, DIDNT_HELP];
const REJECTION: u64 = DOESNT_WORK | DOESNT_WORK_Q | DOES_NOT_WORK | DIDNT_WORK | DIDNT_WORK_Q | WONT_WORK | WONT_WORK_Q | WILL_NOT_WORK | DOES_NOT_HELP | DOESNT_HELP | DIDNT_HELP;

/// The statements of `entries`, after those `earlier` holds.
fn agent_statements(entries: &[Entry], earlier: Option<&Checkpoint>) -> AgentStatements {
    let mut out = earlier.map_or_else(AgentStatements::default, |e| AgentStatements {
        milestones: e.completed_milestones.clone(),
        decisions: e.accepted_decisions.clone(),
        rejected: e.rejected_hypotheses.clone(),
    });
    for text in entries.iter().filter(|e| e.role == Role::Assistant).map(message_text) {
        for line in text.lines() {
            let bare = strip_bullet(line);
            // "Done: …", "Fixed the parser" — a word of its own, with something after it.
            let starts = MILESTONE_WORDS.iter().any(|w| bare.strip_prefix(w).is_some_and(|rest| !rest.starts_with(char::is_alphanumeric) && rest.contains(char::is_alphanumeric)));
            // "Done! Now:" only introduces a list.
            let title = bare.ends_with(':') && bare.split_whitespace().count() <= 3;
            if starts && !title {
                out.milestones.push(clip_ellipsis(bare, 200));
            }
        }
        // Every marker of the message in one pass (by end offset), then each sentence's share.
        let found: Vec<aho_corasick::Match> = statement_markers().find_overlapping_iter(&text).collect();
        if !found.iter().any(|m| 1 << m.pattern().as_usize() & (DECIDES | INSTEAD_OF | REJECTION) != 0) {
            continue; // no sentence of it decides or rejects
        }
        let mut next = 0;
        for sentence in sentences(&text) {
            let sentence = strip_bullet(sentence);
            let (start, end) = (offset_in(&text, sentence), offset_in(&text, sentence) + sentence.len());
            while found.get(next).is_some_and(|m| m.end() <= start) {
                next += 1;
            }
            let inside = found[next..].iter().take_while(|m| m.end() <= end).filter(|m| m.start() >= start);
            let marks = inside.clone().fold(0, |marks, m| marks | 1 << m.pattern().as_usize());
            if marks & DECIDES != 0 || (marks & INSTEAD_OF != 0 && marks & CHOICE_WORDS != 0) {
                out.decisions.push(clip_ellipsis(sentence, 300));
            }
            // The first kind of rejection the sentence holds, where it first does.
            if let Some(kind) = REJECTIONS.into_iter().find(|r| marks & r != 0) {
                let at = inside.filter(|m| 1 << m.pattern().as_usize() == kind).map(|m| m.start()).min().expect("a marked kind was found");
                out.rejected.push(rejection(sentence, at - start, STATEMENT_MARKERS[kind.trailing_zeros() as usize].len()));
            }
        }
    }
    AgentStatements {
        milestones: latest(dedup(out.milestones), MAX_STATEMENTS),
        decisions: latest(dedup(out.decisions), MAX_STATEMENTS),
        rejected: latest(out.rejected.into_iter().fold(vec![], push_new), MAX_STATEMENTS),
    }
}

/// "X doesn't work because Y" → approach X, reason Y (the whole sentence where a part is missing).
fn rejection(sentence: &str, at: usize, len: usize) -> RejectedHypothesis {
    let (approach, reason) = (sentence[..at].trim(), sentence[at + len..].trim());
    let reason = reason.trim_start_matches([',', ':', '-']).trim();
    // Only "because …" names a reason; otherwise the whole sentence is the best one.
    let reason = reason.strip_prefix("because").map_or("", str::trim);
    let whole = clip_ellipsis(sentence, 300);
    RejectedHypothesis { approach: if approach.is_empty() { whole.clone() } else { clip_ellipsis(approach, 300) }, reason: if reason.is_empty() { whole } else { clip_ellipsis(reason, 300) } }
}

fn latest<T>(mut items: Vec<T>, max: usize) -> Vec<T> {
    items.split_off(items.len().saturating_sub(max))
}

fn push_new<T: PartialEq>(mut list: Vec<T>, item: T) -> Vec<T> {
    if !list.contains(&item) {
        list.push(item);
    }
    list
}

// ---- tool calls: files, runs, errors ----------------------------------------------------------

/// The files that successful tool calls read and modified, in first-touch order. As in Pi, a
/// file that was modified is listed only under modified.
pub fn files_touched(entries: &[Entry]) -> (Vec<String>, Vec<String>) {
    Calls::new(entries).files(0)
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum FileOp {
    Read,
    Modify,
}

const READ_TOOLS: &[&str] = &["read", "read_file", "readfile", "view", "cat", "open", "open_file"];
const WRITE_TOOLS: &[&str] = &["write", "write_file", "edit", "edit_file", "multiedit", "create", "create_file", "apply_patch", "patch"];

/// What a tool call does to files, and which files.
fn file_op(name: &str, args: &str) -> Option<(FileOp, Vec<String>)> {
    let name = name.to_lowercase();
    let editor = name == "str_replace_editor" || name == "str_replace_based_edit_tool";
    if !editor && !READ_TOOLS.contains(&name.as_str()) && !WRITE_TOOLS.contains(&name.as_str()) {
        return None; // not a file tool: its arguments are not parsed for nothing
    }
    let value: Option<serde_json::Value> = serde_json::from_str(args).ok();
    let arg = |key: &str| value.as_ref().and_then(|v| v.get(key)).and_then(|v| v.as_str());
    let op = if editor {
        // OpenHands / Anthropic text editor: the command says what happens.
        if arg("command")? == "view" {
            FileOp::Read
        } else {
            FileOp::Modify
        }
    } else if READ_TOOLS.contains(&name.as_str()) {
        FileOp::Read
    } else {
        FileOp::Modify
    };
    let mut paths: Vec<String> = ["path", "file_path", "filePath", "filename"].iter().find_map(|k| arg(k)).map(|p| vec![p.to_string()]).unwrap_or_default();
    if paths.is_empty() && op == FileOp::Modify {
        // Codex apply_patch: the paths are inside the patch text.
        let patch = ["input", "patch"].iter().find_map(|k| arg(k)).unwrap_or(args);
        paths = patch_paths(patch);
    }
    (!paths.is_empty()).then_some((op, paths))
}

fn patch_paths(patch: &str) -> Vec<String> {
    const HEADERS: &[&str] = &["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ", "+++ b/"];
    patch.lines().filter_map(|l| HEADERS.iter().find_map(|h| l.strip_prefix(h))).map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

struct Call<'a> {
    /// Index of the entry holding the call.
    at: usize,
    name: String,
    /// What it does to files, for file tools.
    op: Option<(FileOp, Vec<String>)>,
    /// The shell command text, for command-running tools.
    command: Option<String>,
    result: Option<&'a ToolResult>,
}

struct Calls<'a> {
    list: Vec<Call<'a>>,
}

/// The latest this many runs of each outcome are kept.
const MAX_RUNS: usize = 10;

impl<'a> Calls<'a> {
    fn new(entries: &'a [Entry]) -> Self {
        let results: HashMap<&str, &ToolResult> = entries.iter().flat_map(|e| &e.parts).filter_map(|p| if let Part::ToolResult(r) = p { Some((r.call_id.as_str(), r)) } else { None }).collect();
        let list = entries
            .iter()
            .enumerate()
            .flat_map(|(at, e)| e.parts.iter().map(move |p| (at, p)))
            .filter_map(|(at, p)| if let Part::ToolCall(c) = p { Some((at, c)) } else { None })
            .map(|(at, c)| {
                let op = file_op(&c.name, &c.args);
                let command = if op.is_none() { command_text(&c.args) } else { None };
                Call { at, name: c.name.clone(), op, command, result: results.get(c.id.as_str()).copied() }
            })
            .collect();
        Calls { list }
    }

    /// [`files_touched`] by the calls of entries from `from` on.
    fn files(&self, from: usize) -> (Vec<String>, Vec<String>) {
        let (mut read, mut modified) = (Vec::new(), Vec::new());
        for call in self.list.iter().filter(|c| c.at >= from && !c.result.is_some_and(|r| r.is_error)) {
            match &call.op {
                Some((FileOp::Read, paths)) => read.extend(paths.iter().cloned()),
                Some((FileOp::Modify, paths)) => modified.extend(paths.iter().cloned()),
                None => {}
            }
        }
        let modified = unique(modified);
        let read = unique(read).into_iter().filter(|p| !modified.contains(p)).collect();
        (read, modified)
    }

    /// Each test/build command's latest run with a recognisable outcome (a later run whose
    /// output says nothing, e.g. filtered through `grep`, does not undo it): the runs of entries
    /// from `from` on, after those of `earlier`.
    fn verification(&self, from: usize, earlier: &Verification) -> Verification {
        // Per outcome (passed, failed, not run): each run's command where it was read here, and its item.
        let mut lists: [Vec<(Option<String>, String)>; 3] = [&earlier.passed, &earlier.failed, &earlier.not_run].map(|l| l.iter().map(|item| (None, item.clone())).collect());
        for call in self.list.iter().filter(|c| c.at >= from) {
            let Some(command) = call.command.as_deref().map(run_key).filter(|c| is_check_command(c)) else { continue };
            let verdict = call.result.map(|r| verdict(&r.content, r.is_error)).unwrap_or(Verdict::Unknown);
            let shown = clip_ellipsis(&command, 200);
            // An earlier checkpoint's item is known by its text: `command` or `command — why`.
            let same = |(key, item): &(Option<String>, String)| match key {
                Some(key) => *key == command,
                None => *item == shown || item.strip_prefix(shown.as_str()).is_some_and(|rest| rest.starts_with(" — ")),
            };
            if let Some((list, at)) = (0..3).find_map(|l| lists[l].iter().position(same).map(|at| (l, at))) {
                if verdict == Verdict::Unknown && list != 2 {
                    continue;
                }
                lists[list].remove(at);
            }
            let (list, item) = match verdict {
                Verdict::Passed(why) => (0, format!("{shown} — {why}")),
                Verdict::Failed(why) => (1, format!("{shown} — {why}")),
                Verdict::Unknown => (2, shown),
            };
            lists[list].push((Some(command), item));
        }
        let [passed, failed, not_run] = lists.map(|list| latest(list.into_iter().map(|(_, item)| item).collect(), MAX_RUNS));
        Verification { passed, failed, not_run }
    }

    /// One entry per command family, the last invocation each (of entries from `from` on,
    /// after `earlier`'s), oldest first.
    fn commands(&self, from: usize, earlier: &[CommandRun]) -> Vec<CommandRun> {
        let mut out = earlier.to_vec();
        for call in self.list.iter().filter(|c| c.at >= from) {
            let Some(command) = call.command.as_deref() else { continue };
            let last = clip_ellipsis(&run_key(command), 200);
            let family = command_family(&last);
            if family.is_empty() {
                continue;
            }
            let exit = call.result.and_then(|r| r.content.lines().rev().find_map(|l| exit_code(&l.to_lowercase())));
            out.retain(|c| c.family != family);
            out.push(CommandRun { family, last, exit });
        }
        latest(out, MAX_COMMANDS)
    }

    /// Error results since the operator last spoke (earlier ones were answered by the operator
    /// or the agent moved on) with no later success of the same call (same tool, command or
    /// path). Failed test/build runs are left to `verification`.
    fn unresolved_errors(&self, since: usize) -> Vec<String> {
        let subject = |c: &Call| c.command.as_deref().map(run_key).or_else(|| c.op.as_ref().map(|(_, p)| p.join(" "))).unwrap_or_default();
        let mut out = Vec::new();
        for (i, call) in self.list.iter().enumerate().filter(|(_, c)| c.at >= since) {
            let Some(result) = call.result.filter(|r| r.is_error) else { continue };
            let key = subject(call);
            if is_check_command(&key) {
                continue;
            }
            let retried = self.list[i + 1..].iter().any(|l| l.name == call.name && subject(l) == key && l.result.is_some_and(|r| !r.is_error));
            if !retried {
                // The line that names the error, else the first line.
                let lines = marked_lines(&result.content, output_markers());
                let lines = || lines.iter().map(|&(l, marks)| (l.trim(), marks)).filter(|(l, _)| !l.is_empty());
                let line = lines().find(|(_, marks)| marks & ERROR != 0).or_else(|| lines().next()).map_or("(no output)", |(l, _)| l);
                let what = if key.is_empty() { call.name.clone() } else { format!("{} `{}`", call.name, clip_ellipsis(&key, 120)) };
                out.push(format!("Unresolved error from {what}: {}", clip_ellipsis(line, 200)));
            }
        }
        latest(out, 5)
    }
}

/// The latest this many command families are kept.
const MAX_COMMANDS: usize = 15;

/// `cd /repo && cargo test -p x` → `cargo test`: the program (past `cd` and variable settings),
/// and for tools whose first word is a subcommand, that word.
pub fn command_family(command: &str) -> String {
    const SUBCOMMANDS: &[&str] = &["cargo", "npm", "pnpm", "yarn", "bun", "deno", "git", "go", "docker", "kubectl", "pip", "uv", "poetry", "make", "dotnet", "mvn", "gradle", "rustup", "gh", "npx"];
    let segment = command.split("&&").map(str::trim).filter(|s| !s.starts_with("cd ") && !s.is_empty()).last().unwrap_or("");
    let mut words = segment.split_whitespace().skip_while(|w| w.contains('='));
    let Some(program) = words.next() else { return String::new() };
    let program = program.rsplit('/').next().unwrap_or(program);
    match words.next().filter(|w| SUBCOMMANDS.contains(&program) && !w.starts_with('-') && !w.contains(['/', '.', '"', '\''])) {
        Some(sub) => format!("{program} {sub}"),
        None => program.to_string(),
    }
}

/// A run's identity: its first line, before any pipe, without `2>&1`, so
/// `npm test 2>&1 | tail -5` and `npm test` are the same check.
fn run_key(command: &str) -> String {
    let first = command.lines().next().unwrap_or("");
    let before_pipe = first.split(" | ").next().unwrap_or(first);
    before_pipe.replace("2>&1", "").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The command a shell-like tool runs: `command`/`cmd`/`script` as text or as an argv list
/// (`["bash", "-lc", "cargo test"]` → `cargo test`).
fn command_text(args: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(args).ok()?;
    let raw = ["command", "cmd", "script"].iter().find_map(|k| value.get(k))?;
    let text = match raw {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => {
            let parts: Vec<&str> = parts.iter().filter_map(|p| p.as_str()).collect();
            match parts.as_slice() {
                [shell, flag, script] if ["bash", "sh", "zsh"].contains(shell) && flag.starts_with('-') => script.to_string(),
                _ => parts.join(" "),
            }
        }
        _ => return None,
    };
    let text = text.trim().to_string();
    (!text.is_empty()).then_some(text)
}

const CHECK_WORDS: &[&str] = &[
    "test", "tests", "pytest", "jest", "vitest", "mocha", "nextest", "unittest", "check", "clippy", "lint", "build", "tsc", "make", "ctest", "tox", "rspec", "phpunit", "mypy", "ruff", "eslint",
    "compile", "verify",
];
const NOT_CHECKS: &[&str] = &["ls", "cat", "head", "tail", "grep", "rg", "find", "sed", "awk", "echo", "cd", "git", "less", "wc", "mkdir", "rm", "cp", "mv", "touch"];

/// A test, build or lint run: some command segment (split at `&&`, `;`, `|`) whose program is
/// not a file utility names a check word.
fn is_check_command(command: &str) -> bool {
    command.split(['\n', ';', '|', '&']).any(|segment| {
        let program = segment.split_whitespace().next().unwrap_or("");
        let program = program.rsplit('/').next().unwrap_or(program);
        !program.is_empty() && !NOT_CHECKS.contains(&program) && segment.split(|c: char| !c.is_alphanumeric()).any(|w| CHECK_WORDS.contains(&w.to_lowercase().as_str()))
    })
}

#[derive(Debug, PartialEq)]
enum Verdict {
    Passed(String),
    Failed(String),
    Unknown,
}

markers! {
    /// What run output is searched for, ASCII case-insensitively.
    OUTPUT_MARKERS {
        TEST_RESULT_FAILED = "test result: failed", ERROR_CODE = "error[e", COULD_NOT_COMPILE = "error: could not compile", BUILD_FAILED = "build failed",
        TRACEBACK = "traceback (most recent call last)",
        FAILED = "failed", FAILURES = "failures", FAILING = "failing", ERRORS = "errors", ERROR = "error", FAIL = "fail", PASSED = "passed", PASSING = "passing",
        EXIT_CODE = "exit code", EXITED_WITH_CODE = "exited with code", EXIT_STATUS = "exit status", EXIT_CODE_KEY = "exit_code", EXITCODE = "exitcode", RETURNCODE = "returncode",
        TEST_RESULT_OK = "test result: ok", ALL_TESTS_PASSED = "all tests passed", OK = "ok", FINISHED = "finished", TARGETS = "target(s)", BUILD_SUCCEEDED = "build succeeded",
    }
}
const EXIT_MARKERS: u64 = EXIT_CODE | EXITED_WITH_CODE | EXIT_STATUS | EXIT_CODE_KEY | EXITCODE | RETURNCODE;

/// Classifies a run by its output: any failure signal wins over success signals.
fn verdict(content: &str, is_error: bool) -> Verdict {
    let lines: Vec<(&str, u64)> = marked_lines(content, output_markers()).into_iter().map(|(l, marks)| (l.trim(), marks)).filter(|(l, _)| !l.is_empty()).collect();
    let mut passed: Option<&str> = None;
    for &(line, marks) in &lines {
        let has = |m: u64| marks & m != 0;
        // Lowercased only where a marker's surroundings decide.
        let lower = OnceCell::new();
        let lower = || lower.get_or_init(|| line.to_lowercase()).as_str();
        let counted = |m: u64, word: &str| has(m) && count_before(lower(), word) > 0;
        let exit = || if has(EXIT_MARKERS) { exit_code(lower()) } else { None };
        let fails = has(TEST_RESULT_FAILED)
            || line.starts_with("FAILED")
            || line == "FAIL"
            || line.starts_with("FAIL ")
            || line.starts_with("FAIL\t")
            || line.starts_with("--- FAIL")
            || has(ERROR_CODE | COULD_NOT_COMPILE | BUILD_FAILED | TRACEBACK)
            || [(FAILED, "failed"), (FAILURES, "failures"), (FAILING, "failing"), (ERRORS, "errors"), (ERROR, "error")].into_iter().any(|(m, w)| counted(m, w))
            || exit().is_some_and(|c| c != 0);
        if fails {
            return Verdict::Failed(clip_ellipsis(line, 200));
        }
        let passes = has(TEST_RESULT_OK)
            || counted(PASSED, "passed")
            || counted(PASSING, "passing")
            || exit() == Some(0)
            || has(ALL_TESTS_PASSED)
            // At most two chars lowercase to "ok" (a line of 8 bytes at most).
            || (has(OK) && line.len() <= 8 && lower() == "ok")
            || (line.starts_with("ok ") || line.starts_with("ok\t"))
            || (has(FINISHED) && has(TARGETS) && lower().starts_with("finished"))
            || has(BUILD_SUCCEEDED);
        if passes {
            passed = Some(line);
        }
    }
    match (is_error, passed) {
        (true, _) => {
            // The line that says what failed, else the last (often the exit status).
            let line = lines.iter().find(|(_, marks)| marks & (ERROR | FAIL) != 0).or(lines.last()).map(|(l, _)| *l);
            Verdict::Failed(clip_ellipsis(line.unwrap_or("error"), 200))
        }
        (false, Some(line)) => Verdict::Passed(clip_ellipsis(line, 200)),
        (false, None) => Verdict::Unknown,
    }
}

/// The largest number written right before `word` ("3 failed" → 3).
fn count_before(lower: &str, word: &str) -> u64 {
    lower
        .match_indices(word)
        .filter(|(at, _)| lower[at + word.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric()))
        .filter_map(|(at, _)| {
            let before = lower[..at].trim_end();
            let number = before.trim_end_matches(|c: char| c.is_ascii_digit());
            let digits = &before[number.len()..];
            // "3 failed", not "x3 failed" or "3failed".
            let separate = before.len() < at && number.chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            (separate && !digits.is_empty()).then(|| digits.parse().unwrap_or(u64::MAX))
        })
        .max()
        .unwrap_or(0)
}

/// An exit code the output reports ("exit code: 1", "exited with code 0", `"exit_code": 2`).
fn exit_code(lower: &str) -> Option<i64> {
    const MARKERS: &[&str] = &["exit code", "exited with code", "exit status", "exit_code", "exitcode", "returncode"];
    MARKERS.iter().find_map(|m| {
        let rest = &lower[lower.find(m)? + m.len()..];
        let rest = rest.trim_start_matches([':', '=', '"', ' ']);
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        digits.parse().ok()
    })
}

// ---- artifacts --------------------------------------------------------------------------------

const MAX_ARTIFACTS: usize = 40;

/// URLs and `artifact://` URIs, from what people and tools wrote first, then tool output.
fn artifacts(entries: &[Entry]) -> Vec<ExternalArtifact> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for from_results in [false, true] {
        for part in entries.iter().flat_map(|e| &e.parts) {
            let texts: Vec<&str> = match (part, from_results) {
                (Part::Text(t), false) => vec![t],
                (Part::ToolCall(c), false) => vec![&c.args],
                (Part::Placeholder(p), false) => std::iter::once(p.text.as_str()).chain(p.uri.as_deref()).collect(),
                (Part::ToolResult(r), true) => vec![&r.content],
                _ => vec![],
            };
            for uri in texts.into_iter().flat_map(find_uris) {
                if seen.insert(uri.to_string()) {
                    out.push(ExternalArtifact { name: uri_name(uri), uri: uri.to_string() });
                    if out.len() == MAX_ARTIFACTS {
                        return out;
                    }
                }
            }
        }
    }
    out
}

fn find_uris(text: &str) -> Vec<&str> {
    // One needle every scheme ends with (a substring search, fast), then the scheme before it.
    static SEPARATOR: OnceLock<AhoCorasick> = OnceLock::new();
    let separator = SEPARATOR.get_or_init(|| AhoCorasick::new(["://"]).expect("a fixed needle builds"));
    let scheme_at = |at: usize| ["https", "http", "artifact"].into_iter().find(|s| text[..at].ends_with(s)).map(|s| (at - s.len(), s.len() + 3));
    let mut out = Vec::new();
    let mut from = 0;
    let mut search = 0;
    while let Some(found) = separator.find(aho_corasick::Input::new(text).span(search..text.len())) {
        search = found.start() + 1;
        // A scheme before `from` is inside the URI before.
        let Some((start, scheme)) = scheme_at(found.start()).filter(|(start, _)| *start >= from) else { continue };
        let len = text[start..].find(|c: char| c.is_whitespace() || "\"'<>`)]}|\\".contains(c)).unwrap_or(text.len() - start);
        let uri = text[start..start + len].trim_end_matches(['.', ',', ';', ':', '!', '?']);
        if uri.len() > scheme {
            out.push(uri);
        }
        from = start + len.max(scheme);
        search = search.max(from);
    }
    out
}

/// The last path segment ("https://x.dev/a/b.md?q" → "b.md"), or the host when there is no path.
fn uri_name(uri: &str) -> String {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    let rest = rest.split(['?', '#']).next().unwrap_or(rest).trim_end_matches('/');
    rest.rsplit('/').next().unwrap_or(rest).to_string()
}

// ---- text -------------------------------------------------------------------------------------

/// A list of marker strings (`$list`) and, for each, a bit (`1 << index`) named `$name`: the
/// marks of a text are the bits of the markers it holds.
macro_rules! markers {
    ($(#[$doc:meta])* $list:ident { $($name:ident = $text:literal),* $(,)? }) => {
        $(#[$doc])*
        const $list: &[&str] = &[$($text),*];
        markers!(@bits 0; $($name)*);
    };
    (@bits $n:expr; $name:ident $($rest:ident)*) => {
        const $name: u64 = 1 << ($n);
        markers!(@bits $n + 1; $($rest)*);
    };
    (@bits $n:expr;) => {};
}
use markers;

fn ascii_case_insensitive(markers: &[&str]) -> AhoCorasick {
    AhoCorasick::builder().ascii_case_insensitive(true).build(markers).expect("fixed markers build")
}

fn output_markers() -> &'static AhoCorasick {
    static BUILT: OnceLock<AhoCorasick> = OnceLock::new();
    BUILT.get_or_init(|| ascii_case_insensitive(OUTPUT_MARKERS))
}

fn statement_markers() -> &'static AhoCorasick {
    static BUILT: OnceLock<AhoCorasick> = OnceLock::new();
    BUILT.get_or_init(|| ascii_case_insensitive(STATEMENT_MARKERS))
}

/// The non-ASCII chars whose lowercase holds ASCII (the Kelvin sign → "k", "İ" → "i̇"): where a
/// text has one, ASCII case folding finds less than `to_lowercase` would.
const FOLDS_TO_ASCII: [char; 2] = ['\u{130}', '\u{212A}'];

/// Each line of `text` with the marks of the markers it holds, as `line.to_lowercase()` would
/// contain them: one pass over the whole text (markers hold no line break, so each match lies
/// in one line).
fn marked_lines<'t>(text: &'t str, markers: &AhoCorasick) -> Vec<(&'t str, u64)> {
    let mark = |found: aho_corasick::Match| 1u64 << found.pattern().as_usize();
    if text.contains(FOLDS_TO_ASCII) {
        return text.lines().map(|line| (line, markers.find_overlapping_iter(&line.to_lowercase()).fold(0, |marks, m| marks | mark(m)))).collect();
    }
    let mut found = markers.find_overlapping_iter(text).peekable();
    text.lines()
        .map(|line| {
            let end = offset_in(text, line) + line.len();
            let mut marks = 0;
            while let Some(m) = found.next_if(|m| m.end() <= end) {
                marks |= mark(m);
            }
            (line, marks)
        })
        .collect()
}

/// Where `part`, a slice of `text`, starts in it.
fn offset_in(text: &str, part: &str) -> usize {
    part.as_ptr() as usize - text.as_ptr() as usize
}

fn starts_with_word(lower: &str, word: &str) -> bool {
    lower.strip_prefix(word).is_some_and(|rest| !rest.starts_with(char::is_alphanumeric))
}

/// A line without leading list, quote or emphasis markers.
fn strip_bullet(line: &str) -> &str {
    let t = line.trim().trim_start_matches(|c: char| "-*•#>+ ✅".contains(c));
    t.strip_prefix("[x] ").or_else(|| t.strip_prefix("[X] ")).unwrap_or(t).trim()
}

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Exact de-duplication (paths are case-sensitive), first occurrence kept.
fn unique(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items.into_iter().filter(|i| seen.insert(i.clone())).collect()
}

/// De-duplication ignoring case and spacing, first occurrence kept.
fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    items.into_iter().filter(|i| seen.insert(normalize(i))).collect()
}

#[cfg(test)]
#[path = "../tests/support/pi.rs"]
mod pi_sessions;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Origin, ToolCall};

    fn quarter(text: &str) -> u32 {
        text.chars().count().div_ceil(4) as u32
    }

    fn entry(role: Role, origin: Origin, parts: Vec<Part>) -> Entry {
        Entry { id: String::new(), role, origin, parts, tokens: 0, turn: 0, pinned: false }
    }
    fn operator(text: &str) -> Entry {
        entry(Role::User, Origin::Operator, vec![Part::Text(text.into())])
    }
    fn agent(text: &str) -> Entry {
        entry(Role::Assistant, Origin::Agent, vec![Part::Text(text.into())])
    }
    /// A call and its result, as two entries.
    fn tool(id: &str, name: &str, args: &str, output: Option<(&str, bool)>) -> Vec<Entry> {
        let call = ToolCall { id: id.into(), name: name.into(), args: args.into() };
        let mut out = vec![entry(Role::Assistant, Origin::Agent, vec![Part::ToolCall(call)])];
        if let Some((content, is_error)) = output {
            let result = ToolResult { call_id: id.into(), content: content.into(), is_error, elided: None };
            out.push(entry(Role::Tool, Origin::Tool, vec![Part::ToolResult(result)]));
        }
        out
    }

    const FIRST_REQUEST: &str = "Please fix the failing parser tests in src/parser.rs. Don't touch the public API. Never push to main!\nAlso avoid adding new dependencies. I don't understand the lexer.\n```\n// never mind this pasted code\n```\n> you should never do that";
    const LAST_REQUEST: &str = "Great. Now add a regression test for nested braces. Do not change the lexer.";

    fn session() -> Vec<Entry> {
        let mut e = vec![entry(Role::System, Origin::Harness, vec![Part::Text("You are a coding agent. Never do harm.".into())])];
        e.push(operator(FIRST_REQUEST));
        e.extend(tool("c1", "read", r#"{"path":"src/parser.rs"}"#, Some(("fn parse() {}", false))));
        e.extend(tool("c2", "bash", r#"{"command":"cargo test"}"#, Some(("running 3 tests\ntest result: FAILED. 2 passed; 1 failed; 0 ignored", false))));
        e.push(agent("Using a regex doesn't work because nested braces break it. I decided to write a small recursive descent parser."));
        e.extend(tool("c3", "str_replace_editor", r#"{"command":"str_replace","path":"src/parser.rs","old_str":"a","new_str":"b"}"#, Some(("ok", false))));
        e.extend(tool("c4", "str_replace_editor", r#"{"command":"view","path":"src/lexer.rs"}"#, Some(("fn lex() {}", false))));
        e.extend(tool("c5", "bash", r#"{"command":"ls nowhere"}"#, Some(("ls: nowhere: No such file", true))));
        e.extend(tool("c6", "bash", r#"{"command":"cargo test 2>&1 | tail -3"}"#, Some(("test result: ok. 3 passed; 0 failed; 0 ignored", false))));
        e.extend(tool("c6b", "bash", r#"{"command":"cargo test | grep nested"}"#, Some(("", false))));
        e.extend(tool("c7", "bash", r#"{"command":"npm run lint"}"#, Some(("", false))));
        e.push(agent("Fixed the parser: nested braces now parse.\nSee https://doc.rust-lang.org/book/ch09-00.html for details."));
        e.push(operator(LAST_REQUEST));
        e.extend(tool("c8", "Edit", r#"{"file_path":"src/missing.rs"}"#, Some(("Traceback\nError: file not found\nmore", true))));
        e.push(agent("Next: add the test in tests/parser.rs\nTODO: update CHANGELOG"));
        e
    }

    #[test]
    fn extracts_intent_files_runs_and_statements() {
        let cp = extract_with(&session(), 4000, &quarter);
        assert_eq!(cp.task_objective, LAST_REQUEST);
        assert_eq!(cp.negative_constraints, ["Don't touch the public API.", "Never push to main!", "Also avoid adding new dependencies.", "Do not change the lexer."]);
        assert_eq!(cp.files_read, ["src/lexer.rs"]);
        assert_eq!(cp.files_modified, ["src/parser.rs"]);
        assert_eq!(cp.verification.passed, ["cargo test — test result: ok. 3 passed; 0 failed; 0 ignored"]);
        assert!(cp.verification.failed.is_empty(), "the later passing run supersedes the failure");
        assert_eq!(cp.verification.not_run, ["npm run lint"]);
        assert_eq!(cp.completed_milestones, ["Fixed the parser: nested braces now parse."]);
        assert_eq!(cp.accepted_decisions, ["I decided to write a small recursive descent parser."]);
        assert_eq!(cp.rejected_hypotheses, [RejectedHypothesis { approach: "Using a regex".into(), reason: "nested braces break it.".into() }]);
        assert_eq!(cp.pending_work, [LAST_REQUEST, "Next: add the test in tests/parser.rs", "TODO: update CHANGELOG", "Unresolved error from Edit `src/missing.rs`: Error: file not found"]);
        assert_eq!(cp.next_immediate_action, "Now add a regression test for nested braces.");
        assert_eq!(cp.external_artifacts, [ExternalArtifact { name: "ch09-00.html".into(), uri: "https://doc.rust-lang.org/book/ch09-00.html".into() }]);
        // What the host will validate: every schema key, nothing else.
        let value: serde_json::Value = serde_json::from_str(&cp.to_json()).unwrap();
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        let mut keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        let required: Vec<&str> = schema["required"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        assert_eq!(required, FIELDS);
        keys.sort();
        // …the optional root objective (the first request) and the operator's ledger.
        let mut fields = FIELDS.to_vec();
        fields.extend(["root_objective", "goal_state", "commands"]);
        fields.sort();
        assert_eq!(keys, fields);
        assert!(keys.iter().all(|k| schema["properties"][k].is_object()), "{keys:?}");
        assert_eq!(cp.goal_state, ["Please fix the failing parser tests in src/parser.rs."]);
        // Each command family once, its last run and how it ended.
        let families: Vec<(&str, Option<i64>)> = cp.commands.iter().map(|c| (c.family.as_str(), c.exit)).collect();
        assert!(families.contains(&("cargo test", None)), "{:?}", cp.commands);
        assert_eq!(cp.commands.iter().filter(|c| c.family == "cargo test").count(), 1);
        assert_eq!(command_family("cd /repo && RUST_LOG=1 cargo test -p x 2>&1"), "cargo test");
        assert_eq!(command_family("./run.sh --fast"), "run.sh");
        assert_eq!(CommandRun::from_shown("npm run lint (exit 2)"), CommandRun { family: "npm run".into(), last: "npm run lint".into(), exit: Some(2) });
        assert_eq!(cp.root_objective, FIRST_REQUEST.trim());
    }

    #[test]
    fn markers_match_whatever_the_case() {
        let failed = |out: &str| matches!(verdict(out, false), Verdict::Failed(_));
        let passed = |out: &str| matches!(verdict(out, false), Verdict::Passed(_));
        assert!(failed("TEST RESULT: FAILED. 1 passed; 2 failed") && failed("Error[E0308]: mismatched types") && failed("Build Failed"));
        assert!(failed("3 FAILED, 1 passed") && failed("Exit Code: 2") && !failed("exit code: 0"));
        assert!(passed("ALL TESTS PASSED") && passed("Ok") && passed("FINISHED `dev` profile target(s) in 1s") && passed("12 PASSED"));
        // A Kelvin sign lowercases to "k", as `to_lowercase` reads it.
        assert!(failed("TRACEBAC\u{212A} (most recent call last):"));
        assert!(matches!(verdict("Segfault\nNo ERROR here\nlast", true), Verdict::Failed(line) if line == "No ERROR here"));
        let agent = agent_statements(&[agent("We DECIDED TO keep it. Going With plan B. LET'S use X Instead Of Y. Regex DOESN'T WORK because of nesting.")], None);
        assert_eq!(agent.decisions, ["We DECIDED TO keep it.", "Going With plan B.", "LET'S use X Instead Of Y."]);
        assert_eq!(agent.rejected, [RejectedHypothesis { approach: "Regex".into(), reason: "of nesting.".into() }]);
        assert_eq!(todo_lines("ToDo: docs\nNEXT: release\nnextgen is out"), ["ToDo: docs", "NEXT: release"]);
    }

    /// Where a text holds none of these, ASCII case folding finds what `to_lowercase` does.
    #[test]
    fn only_two_chars_lowercase_to_ascii() {
        let folding: Vec<char> = (0..=char::MAX as u32).filter_map(char::from_u32).filter(|c| !c.is_ascii() && c.to_lowercase().any(|l| l.is_ascii())).collect();
        assert_eq!(folding, FOLDS_TO_ASCII);
    }

    /// The code the matchers replaced, as it was: the oracle on recorded sessions.
    mod before {
        use super::super::*;

        pub fn verdict(content: &str, is_error: bool) -> Verdict {
            let mut passed: Option<&str> = None;
            for line in content.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let lower = line.to_lowercase();
                let fails = lower.contains("test result: failed")
                    || line.starts_with("FAILED")
                    || line == "FAIL"
                    || line.starts_with("FAIL ")
                    || line.starts_with("FAIL\t")
                    || line.starts_with("--- FAIL")
                    || lower.contains("error[e")
                    || lower.contains("error: could not compile")
                    || lower.contains("build failed")
                    || lower.contains("traceback (most recent call last)")
                    || ["failed", "failures", "failing", "errors", "error"].iter().any(|w| count_before(&lower, w) > 0)
                    || exit_code(&lower).is_some_and(|c| c != 0);
                if fails {
                    return Verdict::Failed(clip_ellipsis(line, 200));
                }
                let passes = lower.contains("test result: ok")
                    || count_before(&lower, "passed") > 0
                    || count_before(&lower, "passing") > 0
                    || exit_code(&lower) == Some(0)
                    || lower.contains("all tests passed")
                    || lower == "ok"
                    || (line.starts_with("ok ") || line.starts_with("ok\t"))
                    || (lower.starts_with("finished") && lower.contains("target(s)"))
                    || lower.contains("build succeeded");
                if passes {
                    passed = Some(line);
                }
            }
            match (is_error, passed) {
                (true, _) => {
                    let lines = || content.lines().map(str::trim).filter(|l| !l.is_empty());
                    let line = lines().find(|l| ["error", "fail"].iter().any(|w| l.to_lowercase().contains(w))).or_else(|| lines().next_back());
                    Verdict::Failed(clip_ellipsis(line.unwrap_or("error"), 200))
                }
                (false, Some(line)) => Verdict::Passed(clip_ellipsis(line, 200)),
                (false, None) => Verdict::Unknown,
            }
        }

        /// Decisions and rejections of one agent text.
        pub fn statements(text: &str) -> (Vec<String>, Vec<RejectedHypothesis>) {
            const DECISION_MARKERS: &[&str] = &["decided to", "going with", "instead of"];
            const CHOICE_WORDS: &[&str] = &["i'll", "i will", "we'll", "we will", "let's", "let me", "switch", "chose", "choose", "prefer", "decid", "going with"];
            const REJECTION_MARKERS: &[&str] =
                &["doesn't work", "doesn’t work", "does not work", "didn't work", "didn’t work", "won't work", "won’t work", "will not work", "does not help", "doesn't help", "didn't help"];
            let (mut decisions, mut rejected) = (Vec::new(), Vec::new());
            for sentence in sentences(text) {
                let sentence = strip_bullet(sentence);
                let lower = sentence.to_ascii_lowercase();
                let decides = |m: &&str| lower.contains(m) && (*m != "instead of" || CHOICE_WORDS.iter().any(|c| lower.contains(c)));
                if DECISION_MARKERS.iter().any(decides) {
                    decisions.push(clip_ellipsis(sentence, 300));
                }
                if let Some((at, len)) = REJECTION_MARKERS.iter().find_map(|m| lower.find(m).map(|at| (at, m.len()))) {
                    rejected.push(rejection(sentence, at, len));
                }
            }
            (decisions, rejected)
        }

        pub fn todo_lines(text: &str) -> Vec<String> {
            let mut out = Vec::new();
            let mut in_list = false;
            for line in text.lines() {
                if in_list {
                    if let Some(item) = strip_list_marker(line) {
                        out.push(clip_ellipsis(item, 300));
                        continue;
                    }
                    in_list = line.trim().is_empty();
                    if in_list {
                        continue;
                    }
                }
                let bare = strip_bullet(line);
                let lower = bare.to_lowercase();
                if lower.contains("todo") || starts_with_word(&lower, "next") {
                    if bare.ends_with(':') || line.trim_start().starts_with('#') {
                        in_list = true;
                    } else {
                        out.push(clip_ellipsis(bare, 300));
                    }
                }
            }
            out
        }

        pub fn find_uris(text: &str) -> Vec<&str> {
            let mut out = Vec::new();
            let mut from = 0;
            while let Some(at) = ["https://", "http://", "artifact://"].iter().filter_map(|s| text[from..].find(s).map(|i| (from + i, s.len()))).min() {
                let (start, scheme) = at;
                let len = text[start..].find(|c: char| c.is_whitespace() || "\"'<>`)]}|\\".contains(c)).unwrap_or(text.len() - start);
                let uri = text[start..start + len].trim_end_matches(['.', ',', ';', ':', '!', '?']);
                if uri.len() > scheme {
                    out.push(uri);
                }
                from = start + len.max(scheme);
            }
            out
        }
    }

    /// Every text of the recorded sessions (and a few made to be awkward) reads the same with
    /// one pass of the matchers as with the lowercase copies and searches they replaced.
    #[test]
    fn the_matchers_find_what_the_searches_they_replaced_found() {
        let awkward = [
            "BUİLD FAİLED\nTRACEBAC\u{212A} (most recent call last)\n2 errors",
            "see https://a.dev/x and http://b.dev, artifact://a-1/2. xhttps://c.dev https://",
            "http://https://x.dev/ ftp://no artifact:// https://d.dev/a\"b",
            "I'll use A instead of B. It didn’t work: no. Doesn't work, because it won’t work because.",
            "- [x] TODO one\n## Next steps\n1. a\n\nnext: b\r\nNext!",
        ];
        let mut texts: Vec<(String, bool)> = awkward.iter().map(|t| (t.to_string(), true)).collect();
        for (_, entries) in pi_sessions::sessions() {
            for entry in &entries {
                texts.push((message_text(entry), false));
                for part in &entry.parts {
                    match part {
                        Part::ToolResult(r) => texts.push((r.content.clone(), r.is_error)),
                        Part::ToolCall(c) => texts.push((c.args.clone(), false)),
                        _ => {}
                    }
                }
            }
        }
        for (text, is_error) in &texts {
            assert_eq!(verdict(text, *is_error), before::verdict(text, *is_error), "{text}");
            let now = agent_statements(&[agent(text)], None);
            let (decisions, rejected) = before::statements(text);
            assert_eq!((latest(dedup(decisions), MAX_STATEMENTS), latest(rejected.into_iter().fold(vec![], push_new), MAX_STATEMENTS)), (now.decisions, now.rejected), "{text}");
            assert_eq!(todo_lines(text), before::todo_lines(text), "{text}");
            assert_eq!(find_uris(text), before::find_uris(text), "{text}");
        }
    }

    #[test]
    fn a_later_checkpoint_reads_only_what_is_new_and_holds_what_a_whole_extraction_holds() {
        let mut entries = session();
        entries.iter_mut().enumerate().for_each(|(n, e)| e.id = format!("e{n}"));
        // The next turn runs the tests again (failing now) and a lint the first turn never ran.
        entries.push(operator("Run the tests again, then lint."));
        entries.extend(tool("c9", "bash", r#"{"command":"cargo test"}"#, Some(("test result: FAILED. 2 passed; 1 failed", false))));
        entries.extend(tool("c10", "bash", r#"{"command":"npm run lint"}"#, Some(("✓ 0 problems\nProcess exited with code 0", false))));
        entries.push(agent("Fixed the lint warnings. Going with the old lexer."));
        for covered in entries.iter().enumerate().filter(|(_, e)| is_operator_message(e)).map(|(at, _)| at) {
            let previous = extract_with(&entries[..covered], 4000, &quarter);
            let later = extract_since(&previous, &entries, &entries[covered - 1].id, 4000, &quarter);
            assert_eq!(later, extract_with(&entries, 4000, &quarter), "covered through {covered}");
        }
        let last_turn = entries.iter().rposition(is_operator_message).unwrap();
        let through = entries[last_turn - 1].id.clone();
        let cp = extract_since(&extract_with(&entries[..last_turn], 4000, &quarter), &entries, &through, 4000, &quarter);
        assert_eq!(cp.verification.failed, ["cargo test — test result: FAILED. 2 passed; 1 failed"]);
        assert_eq!(cp.verification.passed, ["npm run lint — Process exited with code 0"]);
        assert!(cp.verification.not_run.is_empty(), "the lint ran since");
        assert_eq!(cp.completed_milestones, ["Fixed the parser: nested braces now parse.", "Fixed the lint warnings. Going with the old lexer."]);
        assert_eq!(cp.accepted_decisions, ["I decided to write a small recursive descent parser.", "Going with the old lexer."]);
        // What the previous checkpoint holds from entries no longer present stays.
        let earlier = Checkpoint { negative_constraints: vec!["Keep the MSRV.".into()], files_modified: vec!["build.rs".into()], ..Default::default() };
        let cp = extract_since(&merge(&earlier, extract_with(&entries[..last_turn], 4000, &quarter)), &entries[1..], &through, 4000, &quarter);
        assert_eq!(cp.negative_constraints[0], "Keep the MSRV.");
        assert_eq!(cp.files_modified, ["build.rs", "src/parser.rs"]);
    }

    #[test]
    fn a_short_last_request_keeps_the_one_before() {
        let entries = [operator("Port the footer to the theme system, keep colors."), agent("Done: ported."), operator("yes, do it all")];
        assert_eq!(extract_with(&entries, 4000, &quarter).task_objective, "Port the footer to the theme system, keep colors.\n\nLatest request: yes, do it all");
        assert_eq!(extract_with(&entries[..1], 4000, &quarter).task_objective, "Port the footer to the theme system, keep colors.");
    }

    #[test]
    fn instead_of_counts_only_when_chosen() {
        let entries = [agent("It uses chalk instead of the theme. I'll use the theme instead of chalk.")];
        assert_eq!(extract_with(&entries, 4000, &quarter).accepted_decisions, ["I'll use the theme instead of chalk."]);
        assert_eq!(run_key("cd a && npm test 2>&1 | tail -5\nmore"), "cd a && npm test");
    }

    #[test]
    fn the_budget_keeps_the_newest_operator_text_first() {
        let entries = session();
        let budget = quarter(LAST_REQUEST) + quarter("Do not change the lexer.") + quarter("Also avoid adding new dependencies.");
        let cp = extract_with(&entries, budget, &quarter);
        assert_eq!(cp.task_objective, LAST_REQUEST);
        // The weightiest statements first, the newest among equals; the rest is left out.
        assert_eq!(cp.negative_constraints, ["Also avoid adding new dependencies.", "Do not change the lexer."]);
        // An objective larger than the whole budget is clipped, not dropped.
        let cp = extract_with(&entries, 5, &quarter);
        assert!(cp.task_objective.starts_with("Great. Now a") && cp.task_objective.ends_with('…'));
        assert!(cp.negative_constraints.is_empty());
    }

    #[test]
    fn classifies_run_outputs() {
        let failed = |out: &str| matches!(verdict(out, false), Verdict::Failed(_));
        let passed = |out: &str| matches!(verdict(out, false), Verdict::Passed(_));
        assert!(passed("test result: ok. 12 passed; 0 failed; 0 ignored"));
        assert!(passed("===== 10 passed in 0.52s ====="));
        assert!(passed("    Finished `release` profile [optimized] target(s) in 3.1s"));
        assert!(passed("ok  \tgithub.com/x/y\t0.2s"));
        assert!(passed("Process exited with code 0"));
        assert!(failed("test result: FAILED. 2 passed; 1 failed"));
        assert!(failed("===== 1 failed, 9 passed in 0.52s ====="));
        assert!(failed("Tests:       1 failed, 5 passed, 6 total"));
        assert!(failed("error[E0308]: mismatched types"));
        assert!(failed("FAILED tests/test_x.py::test_y - AssertionError"));
        assert!(failed("--- FAIL: TestParse (0.00s)"));
        assert!(failed("exit code: 101"));
        assert!(failed("===== 1 error in 0.1s ====="));
        assert_eq!(verdict("Compiling foo v0.1.0\nwrote 3 files", false), Verdict::Unknown);
        assert!(matches!(verdict("boom", true), Verdict::Failed(w) if w == "boom"));
        assert_eq!(count_before("abc3 failed", "failed"), 0);
    }

    #[test]
    fn recognises_check_commands_and_file_tools() {
        assert!(is_check_command("cd /repo && cargo test 2>&1 | tail -20"));
        assert!(is_check_command("pytest -q tests/"));
        assert!(is_check_command("npm run test:unit"));
        assert!(!is_check_command("ls tests/"));
        assert!(!is_check_command("grep -rn test src"));
        assert_eq!(command_text(r#"{"command":["bash","-lc","go test ./..."]}"#).as_deref(), Some("go test ./..."));
        let patch = r#"{"input":"*** Begin Patch\n*** Update File: src/a.rs\n@@\n*** Add File: src/b.rs\n*** End Patch"}"#;
        assert_eq!(file_op("apply_patch", patch), Some((FileOp::Modify, vec!["src/a.rs".into(), "src/b.rs".into()])));
        assert_eq!(file_op("Write", r#"{"filePath":"x.md"}"#), Some((FileOp::Modify, vec!["x.md".into()])));
        assert_eq!(file_op("cat", r#"{"filename":"y"}"#), Some((FileOp::Read, vec!["y".into()])));
        assert_eq!(file_op("bash", r#"{"command":"cat y"}"#), None);
    }

    #[test]
    fn splits_sentences_and_finds_uris() {
        assert_eq!(sentences("Use v1.2 here. Don't push!\n- never rm -rf\nok?"), ["Use v1.2 here.", "Don't push!", "- never rm -rf", "ok?"]);
        assert!(is_constraint("Please don’t reformat files"));
        assert!(is_acknowledgement("Thanks!") && is_acknowledgement("OK, cool.") && !is_acknowledgement("Ship it."));
        assert!(!is_constraint("Stopwatch shows the nevermore time"));
        assert_eq!(find_uris("see (https://x.dev/a/b.md?q=1), and artifact://a-1/3. http:// alone"), ["https://x.dev/a/b.md?q=1", "artifact://a-1/3"]);
        assert_eq!(uri_name("https://x.dev/a/b.md?q=1"), "b.md");
        assert_eq!(uri_name("https://x.dev/"), "x.dev");
        assert_eq!(uri_name("artifact://a-1/3"), "3");
    }

    #[test]
    fn next_steps_titles_take_their_list() {
        let text = "All good.\n\nNext steps:\n1. write docs\n2. release\n\nThat is all. TODO tidy";
        assert_eq!(todo_lines(text), ["write docs", "release", "That is all. TODO tidy"]);
    }

    #[test]
    fn parses_fenced_replies_strictly() {
        let json = Checkpoint { task_objective: "x".into(), ..Default::default() }.to_json();
        assert_eq!(parse(&format!("Here it is:\n```json\n{json}\n```\nBye")).unwrap().task_objective, "x");
        assert_eq!(parse(&json).unwrap().task_objective, "x");
        assert!(parse(&json.replace("\"files_read\":[],", "")).unwrap_err().contains("files_read"));
        assert!(parse(&json.replace("{", "{\"mood\":\"ok\",")).unwrap_err().contains("mood"));
        assert!(parse("no json").is_err());
    }

    #[test]
    fn merge_accumulates_history_and_refreshes_state() {
        let previous =
            Checkpoint { task_objective: "old goal".into(), negative_constraints: vec!["Never push.".into()], files_read: vec!["a.rs".into()], pending_work: vec!["old".into()], ..Default::default() };
        let current =
            Checkpoint { negative_constraints: vec!["Never push.".into(), "Avoid unsafe.".into()], files_modified: vec!["a.rs".into()], pending_work: vec!["new".into()], ..Default::default() };
        let merged = merge(&Checkpoint { root_objective: "first ask".into(), ..previous }, Checkpoint { root_objective: "a later ask".into(), ..current });
        assert_eq!(merged.task_objective, "old goal");
        assert_eq!(merged.root_objective, "first ask", "the first request is never replaced");
        assert_eq!(merged.negative_constraints, ["Never push.", "Avoid unsafe."]);
        assert!(merged.files_read.is_empty());
        assert_eq!(merged.files_modified, ["a.rs"]);
        assert_eq!(merged.pending_work, ["new"]);
    }

    #[test]
    fn renders_headed_sections() {
        let text = render(&extract_with(&session(), 4000, &quarter));
        let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            headings,
            [
                "## Root objective (the operator's first request)",
                "## Objective",
                "## Constraints (verbatim)",
                "## Goal state",
                "## Decisions",
                "## Rejected approaches",
                "## Done",
                "## Pending",
                "## Verification",
                "## Commands",
                "## Files read",
                "## Files modified",
                "## Artifacts",
                "## Next action"
            ]
        );
        assert!(text.contains("## Constraints (verbatim)\n- Don't touch the public API.\n"));
        assert!(text.contains("- passed: cargo test — test result: ok."));
        assert!(text.contains("- not run: npm run lint"));
        assert!(text.contains("- Using a regex — nested braces break it."));
        assert_eq!(render(&Checkpoint::default()), "");
    }
}
