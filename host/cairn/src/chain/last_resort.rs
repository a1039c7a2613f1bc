//! The host-native last step: drops the oldest entries after the protected head up to a safe
//! cut point and leaves one marker saying so. It cannot trap, time out or break pairing, so
//! every chain ends with the context within reach of its target. The dropped entries stay in
//! the durable record. It never drops what the conversation cannot do without: pinned entries
//! (it stops before them), the root objective (the operator's first message) and the latest
//! summary or checkpoint, which it carries over unchanged.

use super::{safe_cuts, Step, StepAnswer, StepError, StepInput, StrategyOutput};
use crate::transcript::{Entry, Origin, Role};

pub struct LastResort;

pub const LAST_RESORT: &str = "last-resort";

/// How the marker begins, and the line above the rules it carries: a later truncation that
/// drops this marker finds its rules again and carries them on.
const MARKER: &str = "[Cairn dropped the";
const RULES: &str = "The operator's rules from that history, verbatim and still in force:";
/// At most this much rule text rides on a marker (the newest rules stay when it is full).
const MAX_RULE_CHARS: usize = 4_000;

/// The operator's rules in the dropped entries, and those earlier markers carried, in order,
/// each once; the root objective's own stay in it.
fn dropped_rules(dropped: &[Entry], root: Option<&str>) -> Vec<String> {
    let mut rules: Vec<String> = Vec::new();
    for entry in dropped {
        let found = match (entry.role, entry.origin) {
            (Role::User, Origin::Operator) if Some(entry.id.as_str()) != root => cairn_rules::intent::constraint_sentences(&entry.model_text()),
            (_, Origin::Harness) => carried(&entry.model_text()),
            _ => Vec::new(),
        };
        for rule in found {
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
    }
    let mut chars = 0;
    let keep = rules.iter().rev().take_while(|r| {
        chars += r.len() + 3;
        chars <= MAX_RULE_CHARS
    });
    let kept = keep.count();
    rules.split_off(rules.len() - kept)
}

/// The rules an earlier marker carried.
fn carried(text: &str) -> Vec<String> {
    if !text.starts_with(MARKER) {
        return Vec::new();
    }
    text.lines().skip_while(|l| *l != RULES).skip(1).filter_map(|l| l.strip_prefix("- ")).map(str::to_string).collect()
}

impl Step for LastResort {
    fn name(&self) -> String {
        format!("{LAST_RESORT}@{}", env!("CARGO_PKG_VERSION"))
    }

    fn run(&self, input: &StepInput<'_>) -> StepAnswer {
        // Clipping the largest outputs loses nothing (each is an artifact): it goes first,
        // and history is dropped only when clipping alone cannot reach the target.
        if let Some(clipped) = clip_to_target(input) {
            return clipped;
        }
        StepAnswer::new(truncate(input))
    }

    fn trusted(&self) -> bool {
        true
    }
}

/// The outcome of clipping every tool output in reach over an eighth of the target, if that
/// alone brings the context to the target (a clipped output counted at its limit, plus the
/// line saying where the whole is).
fn clip_to_target(input: &StepInput<'_>) -> Option<StepAnswer> {
    let target = input.window.token_target;
    let limit = (target / 8).max(super::clip::MIN_TOKENS);
    let reach = &input.entries[input.window.protected_head..input.window.tail_start.max(input.window.protected_head)];
    let over: Vec<u64> = reach.iter().filter(|e| super::clip::oversized(e, limit)).map(|e| e.tokens as u64).collect();
    let total: u64 = input.entries.iter().map(|e| e.tokens as u64).sum();
    let after = total - over.iter().sum::<u64>() + over.len() as u64 * (limit + 64);
    if over.is_empty() || after > target {
        return None;
    }
    let answer = super::clip::clip(input, limit, &(0..0));
    answer.output.is_ok().then_some(answer)
}

fn truncate(input: &StepInput<'_>) -> Result<StrategyOutput, StepError> {
    let entries = input.entries;
    let (head, tail) = (input.window.protected_head, input.window.tail_start);
    if tail <= head {
        return Err(StepError::NoProgress("nothing lies between the protected head and the verbatim tail".into()));
    }
    let cuts = safe_cuts(entries);
    let total: u64 = entries.iter().map(|e| e.tokens as u64).sum();
    // The earliest safe cut that reaches the target; else the latest one before the tail
    // or the first pinned entry, whichever comes first.
    let mut dropped = 0u64;
    let mut cut = None;
    for i in head + 1..=tail {
        if entries[i - 1].pinned {
            break;
        }
        dropped += entries[i - 1].tokens as u64;
        if cuts[i] {
            cut = Some(i);
            if total - dropped <= input.window.token_target {
                break;
            }
        }
    }
    let Some(cut) = cut else {
        return Err(StepError::NoProgress("no safe cut point lies before the verbatim tail".into()));
    };
    let count = cut - head;
    let dropped_entries = &entries[head..cut];
    let plain = |e: &&Entry| e.tool_call_ids().next().is_none() && e.tool_result_ids().next().is_none();
    let root_objective = dropped_entries.iter().filter(plain).find(|e| e.role == Role::User && e.origin == Origin::Operator);
    let latest_summary = dropped_entries.iter().filter(plain).rfind(|e| e.origin == Origin::Summary);
    let mut replacement: Vec<Entry> = root_objective.into_iter().chain(latest_summary).cloned().collect();
    let rules = dropped_rules(dropped_entries, root_objective.map(|e| e.id.as_str()));
    let mut text = format!(
        "{MARKER} {count} oldest entries of this conversation to fit the context window; \
         they are kept in the conversation's record (compaction {}).]",
        input.archive_id
    );
    if !rules.is_empty() {
        text.push_str(&format!("\n{RULES}\n"));
        text.push_str(&rules.iter().map(|r| format!("- {r}")).collect::<Vec<_>>().join("\n"));
    }
    let marker = Entry::text("", Role::User, Origin::Harness, text);
    replacement.push(marker);
    Ok(StrategyOutput { first: entries[head].id.clone(), last: entries[cut - 1].id.clone(), replacement, checkpoint: None, seed: None, retrospective: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{Purpose, Window};
    use crate::transcript::{sample, Transcript};

    #[test]
    fn the_root_objective_and_the_latest_summary_survive_truncation() {
        let mut t = sample::coding_session(12);
        crate::tokenizer::Tokenizer::default().count_transcript(&mut t);
        let summary_at = 6;
        t.entries[summary_at] = Entry::text("s1", Role::User, Origin::Summary, "## Goal\nthe summary");
        let t = Transcript::new(t.entries);
        let window = Window::compute(&t.entries, 100, 10);
        let output = truncate(&input(&t.entries, &window, "a-0123456789abcdef")).unwrap();
        let root = t.entries.iter().find(|e| e.origin == Origin::Operator).unwrap();
        assert_eq!(output.replacement[0], *root, "the operator's first message is carried unchanged");
        assert_eq!(output.replacement[1].id, "s1");
        assert_eq!(output.replacement.last().unwrap().origin, Origin::Harness, "then the marker");
        let applied = crate::chain::apply(&t.entries, &window, output, "a-0123456789abcdef", &crate::tokenizer::Tokenizer::default()).unwrap();
        assert!(applied.tokens_after < t.total_tokens());
    }

    /// One huge output is the whole excess: clipped (recoverably), and no history dropped.
    #[test]
    fn an_oversized_output_is_clipped_before_any_history_is_dropped() {
        let tokenizer = crate::tokenizer::Tokenizer::default();
        let mut t = sample::coding_session(12);
        let at = t.entries.iter().position(|e| e.role == Role::Tool).unwrap();
        let crate::transcript::Part::ToolResult { content, .. } = &mut t.entries[at].parts[0] else { panic!() };
        *content = (0..30_000).map(|i| format!("row {i}\n")).collect();
        tokenizer.count_transcript(&mut t);
        let total = t.total_tokens();
        let window = Window::compute(&t.entries, 100, total / 3);
        let answer = LastResort.run(&input(&t.entries, &window, "a-0123456789abcdef"));
        assert_eq!(answer.artifacts.len(), 1, "the original, byte for byte");
        let applied = crate::chain::apply(&t.entries, &window, answer.output.unwrap(), "a-0123456789abcdef", &tokenizer).unwrap();
        assert_eq!(applied.context.len(), t.entries.len(), "nothing dropped");
        assert!(applied.tokens_after <= total / 3, "{} > {}", applied.tokens_after, total / 3);
        assert!(!applied.context.iter().any(|e| e.model_text().starts_with(MARKER)));
    }

    fn input<'a>(entries: &'a [Entry], window: &'a Window, archive_id: &'a str) -> StepInput<'a> {
        StepInput {
            purpose: Purpose::Compact,
            entries,
            window,
            archive_id,
            artifacts_before: 0,
            archive: None,
            preserve: None,
            resume: None,
            previous_checkpoint: None,
            previous_checkpoint_through: None,
            deadline: std::time::Instant::now(),
            reject_unverified: false,
            budget: None,
        }
    }

    /// A rule the operator gave after the first request outlives the history it was given in,
    /// through one truncation and the next, which drops the first marker.
    #[test]
    fn the_operators_rules_outlive_the_history_they_were_given_in() {
        let tokenizer = crate::tokenizer::Tokenizer::default();
        let mut t = sample::coding_session(12);
        let third = t.entries.iter().position(|e| e.origin == Origin::Operator && e.turn == 3).unwrap();
        t.entries[third].parts.push(crate::transcript::Part::Text { text: "Never touch the migrations folder.".into() });
        tokenizer.count_transcript(&mut t);
        let mut context = t.entries;
        for (round, archive) in ["a-0000000000000001", "a-0000000000000002"].into_iter().enumerate() {
            let window = Window::compute(&context, 100, 10);
            let output = truncate(&input(&context, &window, archive)).unwrap();
            let marker = output.replacement.last().unwrap().model_text();
            assert!(marker.contains("- Never touch the migrations folder."), "round {round}: {marker}");
            assert_eq!(marker.matches("- Never touch the migrations folder.").count(), 1, "each rule once");
            context = crate::chain::apply(&context, &window, output, archive, &tokenizer).unwrap().context;
        }
    }
}
