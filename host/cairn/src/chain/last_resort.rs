//! The host-native last step: drops the oldest entries after the protected head up to a safe
//! cut point and leaves one marker saying so. It cannot trap, time out or break pairing, so
//! every chain ends with the context within reach of its target. The dropped entries stay in
//! the durable record.

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
    Ok(StrategyOutput {
        first: entries[head].id.clone(),
        last: entries[cut - 1].id.clone(),
        replacement: vec![marker],
        checkpoint: None,
        seed: None,
        retrospective: None,
    })
}
