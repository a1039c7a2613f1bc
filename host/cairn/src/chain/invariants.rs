//! The host's checks on every strategy outcome. Plugins are untrusted: whatever they return,
//! the working context that comes out of here keeps its protected parts, its pinned entries
//! and its tool-call/result pairing, and invents no entry ids.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{StepError, StrategyOutput, Window};
use crate::tokenizer::Tokenizer;
use crate::transcript::Entry;

/// Largest replacement a plugin may return, in bytes of text.
const MAX_REPLACEMENT_BYTES: usize = 16 << 20;
/// A replacement may add at most this many entries beyond the ones it replaces.
const MAX_EXTRA_ENTRIES: usize = 64;

/// A checked outcome applied to the context.
#[derive(Debug, Clone)]
pub struct Applied {
    /// Indices `[first, last]` of the replaced entries in the input.
    pub first: usize,
    pub last: usize,
    /// The replacement with host-assigned ids and host-counted tokens.
    pub replacement: Vec<Entry>,
    /// Ids of replaced entries that the replacement does not carry on.
    pub forgotten: Vec<String>,
    /// The new working context.
    pub context: Vec<Entry>,
    pub tokens_after: u64,
}

pub fn apply(entries: &[Entry], window: &Window, output: StrategyOutput, archive_id: &str, tokenizer: &Tokenizer) -> Result<Applied, StepError> {
    let index: HashMap<&str, usize> = entries.iter().enumerate().map(|(i, e)| (e.id.as_str(), i)).collect();
    let find = |id: &str| {
        index.get(id).copied().ok_or_else(|| StepError::Invalid(format!("the replaced range names an unknown entry id {:?}", clip(id))))
    };
    let (first, last) = (find(&output.first)?, find(&output.last)?);
    if first > last {
        return Err(StepError::Invalid(format!("the replaced range is reversed ({} after {})", output.first, output.last)));
    }
    if first < window.protected_head {
        return Err(StepError::Invariant(format!("the replaced range starts inside the protected head (entry {})", entries[first].id)));
    }
    if last >= window.tail_start {
        return Err(StepError::Invariant(format!("the replaced range reaches into the verbatim tail (entry {})", entries[last].id)));
    }
    if let Some(pinned) = entries[first..=last].iter().find(|e| e.pinned) {
        return Err(StepError::Invariant(format!("the replaced range contains pinned entry {}", pinned.id)));
    }
    let bytes: usize = output.replacement.iter().map(|e| e.model_text().len()).sum();
    if bytes > MAX_REPLACEMENT_BYTES || output.replacement.len() > last - first + 1 + MAX_EXTRA_ENTRIES {
        return Err(StepError::Invalid(format!("the replacement is too large ({} entries, {bytes} bytes)", output.replacement.len())));
    }

    let mut replacement = output.replacement;
    let mut reused = HashSet::new();
    for (n, entry) in replacement.iter_mut().enumerate() {
        if entry.id.is_empty() {
            entry.id = format!("{archive_id}-r{}", n + 1);
            entry.turn = entries[first].turn;
        } else {
            let at = index.get(entry.id.as_str()).copied();
            if !at.is_some_and(|i| (first..=last).contains(&i)) {
                return Err(StepError::Invariant(format!("the replacement invents entry id {:?}", clip(&entry.id))));
            }
            if !reused.insert(entry.id.clone()) {
                return Err(StepError::Invariant(format!("the replacement uses entry id {:?} twice", clip(&entry.id))));
            }
        }
        tokenizer.count_entry(entry);
    }
    if replacement.iter().any(|e| e.pinned && !reused.contains(&e.id)) {
        return Err(StepError::Invariant("a new replacement entry claims to be pinned".into()));
    }

    let mut context = Vec::with_capacity(entries.len() - (last - first + 1) + replacement.len());
    context.extend_from_slice(&entries[..first]);
    context.extend(replacement.iter().cloned());
    context.extend_from_slice(&entries[last + 1..]);
    if let Some(problem) = pairing_problems(&context).difference(&pairing_problems(entries)).next() {
        return Err(StepError::Invariant(format!("the outcome breaks tool-call pairing: {problem}")));
    }

    let forgotten = entries[first..=last].iter().filter(|e| !reused.contains(&e.id)).map(|e| e.id.clone()).collect();
    let tokens_after = context.iter().map(|e| e.tokens as u64).sum();
    Ok(Applied { first, last, replacement, forgotten, context, tokens_after })
}

/// Every way the context's tool calls and results fail to pair up: a call with no later
/// result, a result with no earlier call, a call answered twice, a duplicated call id.
/// Compared before and after, so a plugin is blamed only for what it broke.
pub fn pairing_problems(entries: &[Entry]) -> BTreeSet<String> {
    let mut problems = BTreeSet::new();
    let mut open: HashSet<&str> = HashSet::new();
    let mut seen_calls: HashSet<&str> = HashSet::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for entry in entries {
        for id in entry.tool_result_ids() {
            if !open.remove(id) {
                if answered.contains(id) {
                    problems.insert(format!("tool call {id} is answered twice"));
                } else {
                    problems.insert(format!("tool result {id} has no earlier tool call"));
                }
            }
            answered.insert(id);
        }
        for id in entry.tool_call_ids() {
            if !seen_calls.insert(id) {
                problems.insert(format!("tool call id {id} is used twice"));
            }
            open.insert(id);
        }
    }
    problems.extend(open.into_iter().map(|id| format!("tool call {id} has no result")));
    problems
}

fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}
