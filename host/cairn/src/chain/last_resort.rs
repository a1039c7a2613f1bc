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

impl Step for LastResort {
    fn name(&self) -> String {
        format!("{LAST_RESORT}@{}", env!("CARGO_PKG_VERSION"))
    }

    fn run(&self, input: &StepInput<'_>) -> StepAnswer {
        StepAnswer::new(truncate(input))
    }

    fn trusted(&self) -> bool {
        true
    }
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
    let marker = Entry::text(
        "",
        Role::User,
        Origin::Harness,
        format!(
            "[Cairn dropped the {count} oldest entries of this conversation to fit the context window; \
             they are kept in the conversation's record (compaction {}).]",
            input.archive_id
        ),
    );
    replacement.push(marker);
    Ok(StrategyOutput {
        first: entries[head].id.clone(),
        last: entries[cut - 1].id.clone(),
        replacement,
        checkpoint: None,
        seed: None,
        retrospective: None,
    })
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
        let input = StepInput {
            purpose: Purpose::Compact,
            entries: &t.entries,
            window: &window,
            archive_id: "a-0123456789abcdef",
            archive: None,
            preserve: None,
            resume: None,
            previous_checkpoint: None,
            deadline: std::time::Instant::now(),
        };
        let output = truncate(&input).unwrap();
        let root = t.entries.iter().find(|e| e.origin == Origin::Operator).unwrap();
        assert_eq!(output.replacement[0], *root, "the operator's first message is carried unchanged");
        assert_eq!(output.replacement[1].id, "s1");
        assert_eq!(output.replacement.last().unwrap().origin, Origin::Harness, "then the marker");
        let applied = crate::chain::apply(&t.entries, &window, output, "a-0123456789abcdef", &crate::tokenizer::Tokenizer::default()).unwrap();
        assert!(applied.tokens_after < t.total_tokens());
    }
}
