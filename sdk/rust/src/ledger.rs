//! The operator's ledger of a checkpoint — rules of every form, facts with their values,
//! decisions and goal state, each quoted verbatim, the superseded ones set apart — and the
//! checkpoint as the context shows it: a summary text Cairn recognises again after any format
//! wrote and read it, filled by value within a token budget.

use std::collections::{BTreeMap, HashSet};

use cairn_rules::statements::{classify, operator_statements, superseded_by, supersedes, Kind, Statement};

use crate::checkpoint::{merge as merge_checkpoints, render, Checkpoint, CommandRun, ExternalArtifact, RejectedHypothesis, Rule};
use crate::types::{CompactRequest, Entry};
use crate::{is_own_checkpoint, message_text};

/// The fewest tokens a summary is given, whatever the target leaves: the operator's weightiest
/// rules fit in it. A budget the rest of the context already fills is the host's to report.
const MIN_ROOM: u64 = 64;

/// The first line of every checkpoint Cairn writes into a context: how it knows its own
/// checkpoint when a harness hands it back, whatever the format (`cairn_rules` has it, so the
/// host's readers mark such entries as summaries too).
pub use cairn_rules::intent::CHECKPOINT_TITLE;

/// The operator statements of `messages` (oldest first), later ones superseding earlier ones
/// on the same subject, into `cp`'s ledger fields; within `budget` tokens of quoted text, the
/// weightiest first (newest first among equals).
pub fn extract(cp: &mut Checkpoint, messages: &[String], budget: u32, count: &dyn Fn(&str) -> u32) {
    // Each statement with its normalized text: normalized once, not once per comparison.
    let mut said: Vec<(String, Statement)> = Vec::new();
    for statement in messages.iter().flat_map(|m| operator_statements(m)) {
        let key = normalize(&statement.text);
        if let Some(same) = said.iter().position(|(n, _)| *n == key) {
            said.remove(same); // restated: it stands where it was said last
        } else if let Some(old) = superseded_by(&statement.text, said.iter().map(|(_, s)| s.text.as_str())) {
            cp.overridden.push(said.remove(old).1.text);
        }
        said.push((key, statement));
    }
    let current: Vec<Statement> = said.into_iter().map(|(_, statement)| statement).collect();
    // The budget keeps the weightiest statements; the kept ones stay in conversation order.
    let mut order: Vec<usize> = (0..current.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(current[i].weight), std::cmp::Reverse(i)));
    let mut left = budget;
    let mut kept = vec![false; current.len()];
    for i in order {
        let tokens = count(&current[i].text);
        if tokens <= left {
            left -= tokens;
            kept[i] = true;
        }
    }
    for (statement, _) in current.into_iter().zip(kept).filter(|(_, k)| *k) {
        place(cp, statement.kind, statement.text);
    }
}

fn place(cp: &mut Checkpoint, kind: Kind, text: String) {
    match kind {
        Kind::Prohibition => cp.negative_constraints.push(text),
        Kind::Obligation | Kind::Process | Kind::Preference => cp.rules.push(Rule { kind: kind.name().into(), text }),
        Kind::Decision => cp.operator_decisions.push(text),
        Kind::Goal => cp.goal_state.push(text),
        Kind::Fact => cp.facts.push(text),
    }
}

/// `current`'s ledger after `previous`'s: what only `previous` holds (said before the entries
/// `current` was read from) first, unless a current statement supersedes it (it moves to
/// `overridden`), then `current`'s own, in its order. A current extraction that read every
/// message `previous` did gives its own ledger back.
pub fn merge(previous: &Checkpoint, current: &Checkpoint, into: &mut Checkpoint) {
    let now = statements(current);
    let said_now: HashSet<String> = now.iter().map(|(_, t)| t).chain(&current.overridden).map(|t| normalize(t)).collect();
    let mut earlier: Vec<(Kind, String)> = statements(previous).into_iter().filter(|(_, t)| !said_now.contains(&normalize(t))).collect();
    let mut overridden = previous.overridden.clone();
    for (_, text) in &now {
        if let Some(old) = superseded_by(text, earlier.iter().map(|(_, t)| t.as_str())) {
            overridden.push(earlier.remove(old).1);
        }
    }
    for o in &current.overridden {
        if !overridden.contains(o) {
            overridden.push(o.clone());
        }
    }
    (into.negative_constraints, into.rules, into.facts, into.goal_state, into.operator_decisions) = Default::default();
    for (kind, text) in earlier.into_iter().chain(now) {
        place(into, kind, text);
    }
    into.overridden = overridden;
}

/// The ledger of `cp` as (kind, text): prohibitions, rules, facts, goal state, decisions.
fn statements(cp: &Checkpoint) -> Vec<(Kind, String)> {
    let mut out: Vec<(Kind, String)> = cp.negative_constraints.iter().map(|t| (Kind::Prohibition, t.clone())).collect();
    out.extend(cp.rules.iter().map(|r| (Kind::named(&r.kind).unwrap_or(Kind::Obligation), r.text.clone())));
    out.extend(cp.facts.iter().map(|t| (Kind::Fact, t.clone())));
    out.extend(cp.goal_state.iter().map(|t| (Kind::Goal, t.clone())));
    out.extend(cp.operator_decisions.iter().map(|t| (Kind::Decision, t.clone())));
    out
}

/// The checkpoints Cairn wrote into `entries` earlier (handed back as context), merged oldest
/// first: what to carry forward when the record has none.
pub fn recovered(entries: &[Entry]) -> Option<Checkpoint> {
    entries.iter().filter(|e| is_own_checkpoint(e)).filter_map(|e| parse_summary(&message_text(e))).reduce(|earlier, later| merge_checkpoints(&earlier, later))
}

/// The reserved config key through which the host says the run has a token budget (the
/// contract has no field for it; [`crate::parse_config`] leaves it out).
pub const BUDGET_KEY: &str = "context_budget_tokens";

/// The run's token budget, if the host set one.
pub fn budget(config: &str) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_str(config).ok()?;
    value.get(BUDGET_KEY)?.as_u64().filter(|&n| n > 0)
}

/// Tokens a summary replacing `range` may take when the run has a budget: the budget less
/// what stays around it (the protected head, the verbatim tail, the range's pinned entries).
/// `None` without a budget: a target the policy's ratio sets is no reason to leave out what
/// the operator said.
pub fn room(request: &CompactRequest, range: &std::ops::RangeInclusive<usize>) -> Option<u32> {
    let budget = budget(&request.config)?;
    let stays: u64 = request.entries.iter().enumerate().filter(|(i, e)| !range.contains(i) || e.pinned).map(|(_, e)| e.tokens as u64).sum();
    Some(budget.saturating_sub(stays).max(MIN_ROOM).min(u32::MAX as u64) as u32)
}

/// The text of the verbatim tail, which the context shows anyway.
pub fn visible_text(request: &CompactRequest) -> String {
    request.entries.iter().skip(request.tail_start as usize).map(message_text).collect::<Vec<_>>().join("\n")
}

/// "2 facts, 1 rules": what `left_out` counts, for logs and the summary.
pub fn left_out_list(left_out: &BTreeMap<String, u32>) -> String {
    left_out.iter().map(|(section, n)| format!("{n} {section}")).collect::<Vec<_>>().join(", ")
}

/// The heading of what a model's summary is given of the operator's words it does not quote.
pub const LEDGER_HEADING: &str = "## Ledger (the operator's words this summary does not quote)";

/// For a model's summary of `entries`: the operator's rules, facts, goal state and decisions
/// there (and in an earlier summary's ledger) that `summary` does not quote, under
/// [`LEDGER_HEADING`]; `None` when it quotes them all. A model keeps decisions and drops paths,
/// numbers and prohibitions; this puts them back, verbatim.
pub fn summary_ledger(summary: &str, entries: &[Entry]) -> Option<String> {
    let operator: Vec<String> = entries.iter().filter(|e| crate::is_operator_message(e)).map(message_text).collect();
    let mut cp = Checkpoint::default();
    extract(&mut cp, &operator, u32::MAX, &|_| 0);
    let earlier = entries.iter().filter(|e| e.origin == crate::types::Origin::Summary).flat_map(|e| ledger_lines(&message_text(e)));
    let said = normalize(summary);
    let mut missing: Vec<String> = Vec::new();
    for text in earlier.chain(statements(&cp).into_iter().map(|(_, text)| text)) {
        if !said.contains(&normalize(&text)) && !missing.iter().any(|m| normalize(m) == normalize(&text)) {
            missing.push(text);
        }
    }
    (!missing.is_empty()).then(|| format!("{LEDGER_HEADING}\n{}", missing.iter().map(|m| format!("- {}", m.replace('\n', "\n  "))).collect::<Vec<_>>().join("\n")))
}

/// The items under an earlier summary's [`LEDGER_HEADING`].
fn ledger_lines(text: &str) -> Vec<String> {
    let Some(at) = text.find(LEDGER_HEADING) else { return vec![] };
    let mut out: Vec<String> = Vec::new();
    for line in text[at + LEDGER_HEADING.len()..].lines().skip(1) {
        if let Some(item) = line.strip_prefix("- ") {
            out.push(item.to_string());
        } else if let (Some(rest), Some(last)) = (line.strip_prefix("  "), out.last_mut()) {
            last.push('\n');
            last.push_str(rest);
        } else {
            break;
        }
    }
    out
}

/// The checkpoint as a summary entry's text: [`CHECKPOINT_TITLE`], then [`render`].
pub fn summary_text(cp: &Checkpoint) -> String {
    // The first request is quoted once, as the root objective, when it was a rule or a fact too.
    let root = normalize(&cp.root_objective);
    let body = if root.is_empty() {
        render(cp)
    } else {
        let mut once = cp.clone();
        for list in [&mut once.negative_constraints, &mut once.facts, &mut once.goal_state, &mut once.operator_decisions] {
            list.retain(|t| normalize(t) != root);
        }
        once.rules.retain(|r| normalize(&r.text) != root);
        render(&once)
    };
    let left_out = left_out_line(&cp.left_out);
    [CHECKPOINT_TITLE.to_string(), body, left_out].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n")
}

/// One short line however much was left out: how many items, and the section most of them are
/// from (the report and the record's checkpoint say it all).
fn left_out_line(left_out: &BTreeMap<String, u32>) -> String {
    if left_out.is_empty() {
        return String::new();
    }
    let (mut largest, total): (Vec<(&String, &u32)>, u32) = (left_out.iter().collect(), left_out.values().sum());
    largest.sort_by_key(|(section, n)| (std::cmp::Reverse(**n), *section));
    format!("\n(Left out for the budget: {total}, mostly {}; in the record.)", largest[0].0)
}

/// The checkpoint a summary text written by [`summary_text`] holds, if `text` is one: the
/// inverse of the rendering, so a checkpoint handed back through any format is merged into the
/// next one instead of being read as the operator's words.
pub fn parse_summary(text: &str) -> Option<Checkpoint> {
    let body = text.trim_start().strip_prefix(CHECKPOINT_TITLE)?;
    let mut cp = Checkpoint::default();
    let mut section = String::new();
    let mut items: Vec<(String, String)> = Vec::new();
    for (at, line) in lines_at(body) {
        if let Some(title) = line.strip_prefix("## ") {
            section = title.trim().to_string();
        } else if let Some(item) = line.strip_prefix("- ") {
            items.push((section.clone(), item.to_string()));
        } else if let (Some(rest), Some(last)) = (line.strip_prefix("  "), items.last_mut()) {
            last.1.push('\n');
            last.1.push_str(rest);
        } else if line.starts_with(ROOT_OBJECTIVE_APPENDED) {
            let rest = &body[at + ROOT_OBJECTIVE_APPENDED.len()..];
            // Up to what the host may append after it (the operator's `preserve` text).
            cp.root_objective = rest.split("\n\n").find(|p| !p.trim().is_empty()).unwrap_or("").trim().to_string();
            break;
        }
    }
    for (section, item) in items {
        let item = item.trim_end().to_string();
        match section.as_str() {
            s if s.starts_with("Root objective") => cp.root_objective = item,
            "Objective" => cp.task_objective = item,
            "Constraints (verbatim)" => cp.negative_constraints.push(item),
            "Rules (verbatim)" => {
                let kind = classify(&item).map_or(Kind::Obligation, |s| if s.kind.is_rule() { s.kind } else { Kind::Obligation });
                cp.rules.push(Rule { kind: kind.name().into(), text: item })
            }
            "Facts" => cp.facts.push(item),
            "Goal state" => cp.goal_state.push(item),
            "Operator decisions" => cp.operator_decisions.push(item),
            "Decisions" => cp.accepted_decisions.push(item),
            "Rejected approaches" => {
                let (approach, reason) = item.split_once(" — ").unwrap_or((&item, &item));
                cp.rejected_hypotheses.push(RejectedHypothesis { approach: approach.into(), reason: reason.into() });
            }
            "Done" => cp.completed_milestones.push(item),
            "Pending" => cp.pending_work.push(item),
            "Verification" => {
                let v = &mut cp.verification;
                if let Some(run) = item.strip_prefix("passed: ") {
                    v.passed.push(run.into());
                } else if let Some(run) = item.strip_prefix("FAILED: ") {
                    v.failed.push(run.into());
                } else if let Some(run) = item.strip_prefix("not run: ") {
                    v.not_run.push(run.into());
                }
            }
            "Commands" => cp.commands.push(CommandRun::from_shown(&item)),
            "Files read" => cp.files_read.push(item),
            "Files modified" => cp.files_modified.push(item),
            "Artifacts" => {
                let (name, uri) = item.strip_suffix('>').and_then(|i| i.rsplit_once(" <")).unwrap_or((&item, &item));
                cp.external_artifacts.push(ExternalArtifact { name: name.into(), uri: uri.into() });
            }
            "Next action" => cp.next_immediate_action = item,
            _ => {}
        }
    }
    Some(cp)
}

/// The lines of `text` with the byte offset each starts at.
fn lines_at(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n').scan(0, |at, line| {
        let start = *at;
        *at += line.len() + 1;
        Some((start, line.strip_suffix('\r').unwrap_or(line)))
    })
}

/// What the host appends to a summary that no longer quotes the root objective
/// (`chain::anchor`), read back as the root objective.
const ROOT_OBJECTIVE_APPENDED: &str = "Root objective (the operator's first request, verbatim):";

/// The sections of a rendered checkpoint, each with what one of its items weighs in a budget.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
enum Section {
    RootObjective,
    Objective,
    Constraints,
    Rules,
    Facts,
    Goal,
    OperatorDecisions,
    Decisions,
    Rejected,
    Done,
    Pending,
    Failed,
    Checks,
    Commands,
    FilesRead,
    FilesModified,
    Artifacts,
    Next,
}

impl Section {
    /// The section's name in the "left out" line.
    fn noun(self) -> &'static str {
        match self {
            Section::RootObjective => "root objective",
            Section::Objective => "objective",
            Section::Constraints => "constraints",
            Section::Rules => "rules",
            Section::Facts => "facts",
            Section::Goal => "goal-state lines",
            Section::OperatorDecisions => "operator decisions",
            Section::Decisions => "decisions",
            Section::Rejected => "rejected approaches",
            Section::Done => "milestones",
            Section::Pending => "pending items",
            Section::Failed => "failed checks",
            Section::Checks => "checks",
            Section::Commands => "commands",
            Section::FilesRead => "files read",
            Section::FilesModified => "files modified",
            Section::Artifacts => "artifacts",
            Section::Next => "next action",
        }
    }

    /// Most important first: the operator's rules; what was tried and failed (so it is not
    /// tried again); the facts and state work needs; then what the agent did and touched.
    fn priority(self) -> u32 {
        match self {
            Section::Constraints | Section::Rules => 100,
            Section::Rejected => 96,
            Section::Failed => 95,
            Section::Facts | Section::Goal => 80,
            Section::OperatorDecisions => 78,
            Section::Objective => 75,
            Section::Pending => 62,
            Section::Next => 60,
            Section::FilesModified => 55,
            Section::Decisions => 50,
            Section::Checks => 45,
            Section::Commands => 42,
            Section::Done => 40,
            Section::RootObjective => 35,
            Section::FilesRead | Section::Artifacts => 30,
        }
    }
}

/// The items of `cp` as (section, index, text), every section.
fn items(cp: &Checkpoint) -> Vec<(Section, usize, String)> {
    let mut out = Vec::new();
    let mut add = |section: Section, texts: Vec<String>| out.extend(texts.into_iter().enumerate().map(|(n, t)| (section, n, t)));
    let one = |s: &str| if s.trim().is_empty() { vec![] } else { vec![s.to_string()] };
    let v = &cp.verification;
    add(Section::RootObjective, one(&cp.root_objective));
    add(Section::Objective, one(&cp.task_objective));
    add(Section::Constraints, cp.negative_constraints.clone());
    add(Section::Rules, cp.rules.iter().map(|r| r.text.clone()).collect());
    add(Section::Facts, cp.facts.clone());
    add(Section::Goal, cp.goal_state.clone());
    add(Section::OperatorDecisions, cp.operator_decisions.clone());
    add(Section::Decisions, cp.accepted_decisions.clone());
    add(Section::Rejected, cp.rejected_hypotheses.iter().map(|r| format!("{} — {}", r.approach, r.reason)).collect());
    add(Section::Done, cp.completed_milestones.clone());
    add(Section::Pending, cp.pending_work.clone());
    add(Section::Failed, v.failed.iter().map(|i| format!("FAILED: {i}")).collect());
    add(Section::Checks, v.passed.iter().map(|i| format!("passed: {i}")).chain(v.not_run.iter().map(|i| format!("not run: {i}"))).collect());
    add(Section::Commands, cp.commands.iter().map(CommandRun::shown).collect());
    add(Section::FilesRead, cp.files_read.clone());
    add(Section::FilesModified, cp.files_modified.clone());
    add(Section::Artifacts, cp.external_artifacts.iter().map(|a| format!("{} <{}>", a.name, a.uri)).collect());
    add(Section::Next, one(&cp.next_immediate_action));
    out
}

/// `cp` cut to what its summary text can hold in `room` tokens, filled by value: the operator's
/// rules first, then rejected approaches and failing checks, then facts and goal state (each
/// weighed by what it names, an update above others), then the rest, the newest first within a
/// section. Items the context shows verbatim anyway (`visible`, the
/// kept tail's text) are not repeated. What does not fit is counted in `left_out`.
pub fn fit(cp: &Checkpoint, room: u32, visible: &str, count: &dyn Fn(&str) -> u32) -> Checkpoint {
    let visible = normalize(visible);
    let all: Vec<(Section, usize, String)> = items(cp).into_iter().filter(|(s, _, text)| *s == Section::RootObjective || !visible.contains(&normalize(text))).collect();
    let whole = keep(cp, &all.iter().map(|(s, n, _)| (*s, *n)).collect());
    if count(&summary_text(&whole)) <= room {
        return whole;
    }
    // An update outweighs what it updates: the operator corrected it, and the old value is gone.
    let updates = |text: &str| cp.overridden.iter().any(|old| supersedes(text, old).is_some());
    let weight = |section: Section, text: &str| {
        section.priority()
            + if matches!(section, Section::Constraints | Section::Rules | Section::Facts | Section::Goal) { classify(text).map_or(0, |s| s.weight) + 2 * updates(text) as u32 } else { 0 }
    };
    let mut order: Vec<&(Section, usize, String)> = all.iter().collect();
    // Each item weighed once: weighing classifies it and checks it against every overridden one.
    order.sort_by_cached_key(|(section, n, text)| (std::cmp::Reverse(weight(*section, text)), *section, std::cmp::Reverse(*n)));
    // Room for the title and the "left out" line first; then item by item, a section's
    // heading counted with its first item.
    let left_out_guess = left_out_line(&BTreeMap::from([("rejected approaches".to_string(), 9999)]));
    let mut used = count(CHECKPOINT_TITLE) + count(&left_out_guess) + 2;
    let mut chosen: Vec<(Section, usize)> = Vec::new();
    let mut skipped: Vec<(Section, usize)> = Vec::new();
    let mut headed: HashSet<Section> = HashSet::new();
    for (section, n, text) in order {
        let heading = if headed.contains(section) { 0 } else { count(heading_of(*section)) + 1 };
        let cost = count(text) + 2 + heading;
        if used + cost <= room {
            used += cost;
            chosen.push((*section, *n));
            headed.insert(*section);
        } else {
            skipped.push((*section, *n));
        }
    }
    let shown = |chosen: &[(Section, usize)], skipped: &[(Section, usize)]| {
        let mut out = keep(cp, &chosen.iter().copied().collect());
        for (section, _) in skipped {
            *out.left_out.entry(section.noun().to_string()).or_default() += 1;
        }
        out
    };
    // The estimate counts pieces; the text as a whole must fit too: the least worth goes first…
    let mut out = shown(&chosen, &skipped);
    while count(&summary_text(&out)) > room {
        let Some(last) = chosen.pop() else { break };
        skipped.insert(0, last);
        out = shown(&chosen, &skipped);
    }
    // …and where the estimate was cautious, what was left out is tried again, worth first
    // (a few misses in a row end it).
    let (mut at, mut misses) = (0, 0);
    while at < skipped.len() && misses < 8 {
        let item = skipped.remove(at);
        chosen.push(item);
        let grown = shown(&chosen, &skipped);
        if count(&summary_text(&grown)) <= room {
            out = grown;
            misses = 0;
        } else {
            chosen.pop();
            skipped.insert(at, item);
            at += 1;
            misses += 1;
        }
    }
    out
}

fn heading_of(section: Section) -> &'static str {
    match section {
        Section::RootObjective => "## Root objective (the operator's first request)",
        Section::Objective => "## Objective",
        Section::Constraints => "## Constraints (verbatim)",
        Section::Rules => "## Rules (verbatim)",
        Section::Facts => "## Facts",
        Section::Goal => "## Goal state",
        Section::OperatorDecisions => "## Operator decisions",
        Section::Decisions => "## Decisions",
        Section::Rejected => "## Rejected approaches",
        Section::Done => "## Done",
        Section::Pending => "## Pending",
        Section::Failed | Section::Checks => "## Verification",
        Section::Commands => "## Commands",
        Section::FilesRead => "## Files read",
        Section::FilesModified => "## Files modified",
        Section::Artifacts => "## Artifacts",
        Section::Next => "## Next action",
    }
}

/// `cp` with only the `chosen` items, in their order.
fn keep(cp: &Checkpoint, chosen: &HashSet<(Section, usize)>) -> Checkpoint {
    let has = |s: Section, n: usize| chosen.contains(&(s, n));
    fn pick<T: Clone>(list: &[T], keep: impl Fn(usize) -> bool) -> Vec<T> {
        list.iter().enumerate().filter(|(n, _)| keep(*n)).map(|(_, t)| t.clone()).collect()
    }
    let mut out = cp.clone();
    let v = &cp.verification;
    out.root_objective = if has(Section::RootObjective, 0) { cp.root_objective.clone() } else { String::new() };
    out.task_objective = if has(Section::Objective, 0) { cp.task_objective.clone() } else { String::new() };
    out.next_immediate_action = if has(Section::Next, 0) { cp.next_immediate_action.clone() } else { String::new() };
    out.negative_constraints = pick(&cp.negative_constraints, |n| has(Section::Constraints, n));
    out.rules = pick(&cp.rules, |n| has(Section::Rules, n));
    out.facts = pick(&cp.facts, |n| has(Section::Facts, n));
    out.goal_state = pick(&cp.goal_state, |n| has(Section::Goal, n));
    out.operator_decisions = pick(&cp.operator_decisions, |n| has(Section::OperatorDecisions, n));
    out.accepted_decisions = pick(&cp.accepted_decisions, |n| has(Section::Decisions, n));
    out.rejected_hypotheses = pick(&cp.rejected_hypotheses, |n| has(Section::Rejected, n));
    out.completed_milestones = pick(&cp.completed_milestones, |n| has(Section::Done, n));
    out.pending_work = pick(&cp.pending_work, |n| has(Section::Pending, n));
    out.verification.failed = pick(&v.failed, |n| has(Section::Failed, n));
    // Passed and not-run items share a section: indexes run through passed, then not run.
    out.verification.passed = pick(&v.passed, |n| has(Section::Checks, n));
    out.verification.not_run = pick(&v.not_run, |n| has(Section::Checks, v.passed.len() + n));
    out.commands = pick(&cp.commands, |n| has(Section::Commands, n));
    out.files_read = pick(&cp.files_read, |n| has(Section::FilesRead, n));
    out.files_modified = pick(&cp.files_modified, |n| has(Section::FilesModified, n));
    out.external_artifacts = pick(&cp.external_artifacts, |n| has(Section::Artifacts, n));
    out
}

fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{extract_with, Verification};
    use crate::is_operator_message;
    use crate::types::{Origin, Part, Role};

    fn quarter(text: &str) -> u32 {
        text.chars().count().div_ceil(4) as u32
    }

    fn said(role: Role, origin: Origin, text: &str) -> Entry {
        Entry { id: String::new(), role, origin, parts: vec![Part::Text(text.into())], tokens: quarter(text), turn: 0, pinned: false }
    }

    fn full() -> Checkpoint {
        Checkpoint {
            root_objective: "Port the parser.\nKeep the API.".into(),
            task_objective: "Add nested braces.".into(),
            negative_constraints: vec!["Never push to main.".into()],
            rules: vec![Rule { kind: "obligation".into(), text: "Always run cargo fmt first.".into() }, Rule { kind: "preference".into(), text: "I prefer short answers.".into() }],
            facts: vec!["The staging URL is https://s.dev/v2.".into()],
            goal_state: vec!["Two cases are failing: QX-1, QX-2.".into()],
            operator_decisions: vec!["New plan: use nom.".into()],
            accepted_decisions: vec!["I'll use a recursive descent parser.".into()],
            rejected_hypotheses: vec![RejectedHypothesis { approach: "A regex".into(), reason: "nested braces break it".into() }],
            completed_milestones: vec!["Fixed the lexer.".into()],
            pending_work: vec!["Write the docs".into()],
            verification: Verification { passed: vec!["cargo test — ok".into()], failed: vec!["npm test — 1 failed".into()], not_run: vec!["cargo clippy".into()] },
            external_artifacts: vec![ExternalArtifact { name: "v2".into(), uri: "https://s.dev/v2".into() }],
            next_immediate_action: "Run the tests.".into(),
            commands: vec![CommandRun { family: "cargo test".into(), last: "cargo test -p lexer".into(), exit: Some(101) }],
            files_read: vec!["src/lexer.rs".into()],
            files_modified: vec!["src/parser.rs".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_summary_reads_back_as_the_checkpoint_it_shows() {
        let cp = full();
        let text = summary_text(&cp);
        assert!(text.starts_with(CHECKPOINT_TITLE));
        assert_eq!(parse_summary(&text), Some(cp.clone()));
        // What the host appends after it (the anchored root objective) reads back too.
        let bare = Checkpoint { root_objective: String::new(), ..cp };
        let appended = format!("{}\n\n{ROOT_OBJECTIVE_APPENDED}\nPort the parser.", summary_text(&bare));
        assert_eq!(parse_summary(&appended).unwrap().root_objective, "Port the parser.");
        assert_eq!(parse_summary("## Objective\n- not ours"), None);
    }

    /// A scripted model's summary that keeps the decision and drops the prohibition, the
    /// fact and the goal: the ledger puts those back, verbatim, and only those; the next
    /// summary's ledger carries them on even if the operator's messages are gone.
    #[test]
    fn a_model_summary_gets_what_it_left_out_as_a_ledger() {
        let entries = [
            said(Role::User, Origin::Operator, "Never force-push to main. The staging URL is https://s.dev/v2."),
            said(Role::User, Origin::Operator, "New plan: port the lexer to nom."),
            said(Role::User, Origin::Operator, "Eval cases QX-1 and QX-2 are failing."),
        ];
        let summary = "## Goal\nPort the lexer.\n\n## Key Decisions\n- New plan: port the lexer to nom.";
        let ledger = summary_ledger(summary, &entries).unwrap();
        assert_eq!(ledger, format!("{LEDGER_HEADING}\n- Never force-push to main.\n- The staging URL is https://s.dev/v2.\n- Eval cases QX-1 and QX-2 are failing."));
        assert_eq!(summary_ledger(&format!("{summary}\n{ledger}"), &entries), None, "a summary that quotes them all needs none");
        let next = [said(Role::User, Origin::Summary, &format!("{summary}\n\n{ledger}")), said(Role::User, Origin::Operator, "Thanks.")];
        assert_eq!(summary_ledger("## Goal\nPort the lexer.", &next).unwrap().lines().count(), 4);
    }

    #[test]
    fn a_budget_keeps_the_rules_first_and_is_never_exceeded() {
        let mut cp = full();
        cp.facts = (0..40).map(|i| format!("The service s{i} listens on port {}.", 7000 + i)).collect();
        for room in [40, 80, 120, 200, 400, 2000] {
            let shown = fit(&cp, room, "", &quarter);
            let text = summary_text(&shown);
            assert!(quarter(&text) <= room || room < 60, "{room}: {} tokens\n{text}", quarter(&text));
            let kept = shown.facts.len() as u32;
            assert_eq!(kept + shown.left_out.get("facts").copied().unwrap_or(0), 40, "{room}: every fact kept or counted");
            if room >= 80 {
                assert_eq!(shown.negative_constraints, cp.negative_constraints, "{room}: the prohibition first");
            }
            if kept > 0 {
                assert_eq!(shown.rules, cp.rules, "{room}: rules before facts");
            }
        }
        // What the verbatim tail shows is not repeated.
        let shown = fit(&cp, 2000, "Never push to main.\nok", &quarter);
        assert!(shown.negative_constraints.is_empty() && shown.left_out.is_empty());
    }

    #[test]
    fn a_checkpoint_handed_back_is_merged_once_never_quoted() {
        let first = [said(Role::User, Origin::Operator, "Never push to main. The staging URL is https://s.dev/v2."), said(Role::User, Origin::Operator, "Budget cap is $300 total.")];
        let mut cp = extract_with(&first, 4000, &quarter);
        for round in 0..5 {
            // Handed back as a plain user message, as OpenAI chat or Anthropic messages carry it.
            let back = said(Role::User, Origin::Operator, &summary_text(&cp));
            assert!(!is_operator_message(&back));
            let update = if round == 2 { "Budget cap is $700 total." } else { "Let's keep going." };
            let entries = [back.clone(), said(Role::User, Origin::Operator, update)];
            let previous = recovered(&entries[..1]).unwrap();
            cp = merge_checkpoints(&previous, extract_with(&entries, 4000, &quarter));
            assert_eq!(cp.negative_constraints, ["Never push to main."], "round {round}");
        }
        assert_eq!(cp.facts, ["The staging URL is https://s.dev/v2."]);
        let text = summary_text(&cp);
        assert!(text.contains("Budget cap is $700 total.") && !text.contains("$300"), "{text}");
    }
}
