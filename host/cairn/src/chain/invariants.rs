//! The host's checks on every strategy outcome. Plugins are untrusted: whatever they return,
//! the working context that comes out of here keeps its protected parts, its pinned entries,
//! its tool-call/result pairing and each provider response whole, and invents no entry ids.

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
    let find = |id: &str| index.get(id).copied().ok_or_else(|| StepError::Invalid(format!("the replaced range names an unknown entry id {:?}", clip(id))));
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
    // A replaced range holds whole provider responses: the blocks of one response (reasoning,
    // text, parallel calls) are replayed together or not at all.
    for (inside, outside) in [(first, first.checked_sub(1)), (last, Some(last + 1))] {
        if outside.and_then(|o| entries.get(o)).is_some_and(|o| super::window::same_response(o, &entries[inside])) {
            return Err(StepError::Invariant(format!("the replaced range splits provider response {} at entry {}", clip(entries[inside].response.as_deref().unwrap_or_default()), entries[inside].id)));
        }
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
            // An earlier stage of the run may have added that id already.
            let mut k = 1;
            while index.contains_key(entry.id.as_str()) {
                k += 1;
                entry.id = format!("{archive_id}-r{}.{k}", n + 1);
            }
            entry.turn = entries[first].turn;
        } else {
            let at = index.get(entry.id.as_str()).copied();
            if !at.is_some_and(|i| (first..=last).contains(&i)) {
                return Err(StepError::Invariant(format!("the replacement invents entry id {:?}", clip(&entry.id))));
            }
            if !reused.insert(entry.id.clone()) {
                return Err(StepError::Invariant(format!("the replacement uses entry id {:?} twice", clip(&entry.id))));
            }
            // What the contract does not carry comes back from the original.
            if let Some(original) = at.map(|i| &entries[i]) {
                entry.response.clone_from(&original.response);
                entry.reported_tokens = original.reported_tokens;
                // An entry handed back unchanged shares the original's text again: the copy
                // that crossed the Wasm boundary is dropped here, not carried through the run.
                if entry.parts == original.parts {
                    entry.parts = original.parts.clone();
                }
            }
        }
        tokenizer.count_entry(entry);
    }
    if replacement.iter().any(|e| e.pinned && !reused.contains(&e.id)) {
        return Err(StepError::Invariant("a new replacement entry claims to be pinned".into()));
    }
    // A pinned entry comes out exactly as it went in, whatever the strategy did with it.
    for entry in replacement.iter_mut() {
        if let Some(original) = index.get(entry.id.as_str()).map(|&i| &entries[i]).filter(|o| o.pinned && (o.parts != entry.parts || !entry.pinned)) {
            *entry = original.clone();
        }
    }

    carry_instructions(entries, first, last, &mut replacement, &mut reused);

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

/// Instructions are not history: a system or developer entry, or an injected instruction block
/// (agents such as Codex place them after the user messages they keep), inside the replaced range
/// comes out verbatim right after the replacement, whatever the strategy returned; unless the
/// same instructions stay in the context anyway (an agent repeats them after each compaction of
/// its own), so copies do not pile up. Pinned entries the strategy dropped come back the same way.
fn carry_instructions(entries: &[Entry], first: usize, last: usize, replacement: &mut Vec<Entry>, reused: &mut HashSet<String>) {
    for entry in &entries[first..=last] {
        if !(entry.is_instructions() || entry.pinned) || reused.contains(&entry.id) {
            continue;
        }
        // Pinned entries always come back; instructions unless a copy stays anyway.
        let kept = !entry.pinned && entries[..first].iter().chain(&entries[last + 1..]).chain(replacement.iter()).any(|k| k.parts == entry.parts);
        if !kept {
            reused.insert(entry.id.clone());
            replacement.push(entry.clone());
        }
    }
}

/// Every way the context's tool calls and results fail to pair up: a call with no later
/// result, a result with no earlier call, a call answered twice, a duplicated call id, a
/// result that does not directly follow its call (providers require the results right after
/// the calling message, with nothing else between). Compared before and after, so a plugin is
/// blamed only for what it broke.
pub fn pairing_problems(entries: &[Entry]) -> BTreeSet<String> {
    let mut problems = BTreeSet::new();
    // Where each call id is answered, in order: one pass, so the check stays linear.
    let mut answered_at: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        for id in entry.tool_result_ids() {
            answered_at.entry(id).or_default().push(i);
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        if entry.tool_call_ids().next().is_none() {
            continue;
        }
        // One past the run of result-carrying entries right after the call.
        let block_end = i + 1 + entries[i + 1..].iter().take_while(|e| e.tool_result_ids().next().is_some()).count();
        for id in entry.tool_call_ids() {
            let first_later = answered_at.get(id).and_then(|at| at.iter().find(|&&p| p > i));
            if first_later.is_some_and(|&p| p >= block_end) {
                problems.insert(format!("the result of tool call {id} does not directly follow it"));
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_must_directly_follow_its_call() {
        let call = |id: &str| Entry { parts: vec![Part::ToolCall { id: "c".into(), name: "bash".into(), args: "{}".into() }].into(), ..text(id, Role::Assistant) };
        let result = |id: &str| Entry { parts: vec![Part::ToolResult { call_id: "c".into(), content: "ok".into(), is_error: false, elided: None }].into(), ..text(id, Role::Tool) };
        let adjacent = [call("1"), result("2"), text("3", Role::User)];
        assert!(pairing_problems(&adjacent).is_empty());
        let apart = [call("1"), text("3", Role::User), result("2")];
        assert_eq!(pairing_problems(&apart).into_iter().collect::<Vec<_>>(), ["the result of tool call c does not directly follow it"]);
    }
    use crate::transcript::{Origin, Part, Role};

    fn text(id: &str, role: Role) -> Entry {
        let mut e = Entry::text(id, role, Origin::Agent, format!("entry {id} with some words in it"));
        e.tokens = 10;
        e
    }

    fn call(id: &str, call: &str) -> Entry {
        Entry { parts: vec![Part::ToolCall { id: call.into(), name: "read".into(), args: "{}".into() }].into(), ..text(id, Role::Assistant) }
    }

    fn result(id: &str, call: &str) -> Entry {
        Entry { parts: vec![Part::ToolResult { call_id: call.into(), content: "x".repeat(400), is_error: false, elided: None }].into(), ..text(id, Role::Tool) }
    }

    fn entries() -> Vec<Entry> {
        vec![text("sys", Role::System), text("u1", Role::User), call("a1", "c1"), result("t1", "c1"), text("a2", Role::Assistant), text("u2", Role::User)]
    }

    fn window() -> Window {
        Window { protected_head: 1, tail_start: 5, token_target: 0 }
    }

    fn output(first: &str, last: &str, replacement: Vec<Entry>) -> StrategyOutput {
        StrategyOutput { first: first.into(), last: last.into(), replacement, checkpoint: None, seed: None, retrospective: None }
    }

    fn check(entries: &[Entry], out: StrategyOutput) -> Result<Applied, StepError> {
        apply(entries, &window(), out, "a-0000000000000000", &Tokenizer::default())
    }

    fn summary() -> Entry {
        Entry::text("", Role::User, Origin::Summary, "summary")
    }

    #[test]
    fn a_summary_of_whole_pairs_is_applied_with_a_host_id() {
        let applied = check(&entries(), output("u1", "a2", vec![summary()])).unwrap();
        assert_eq!(applied.context.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["sys", "a-0000000000000000-r1", "u2"]);
        assert_eq!(applied.forgotten, ["u1", "a1", "t1", "a2"]);
        assert!(applied.replacement[0].tokens > 0, "the host counts tokens itself");
    }

    #[test]
    fn instructions_inside_the_range_come_out_verbatim_after_the_replacement() {
        // Codex's shape: kept user messages, then its instructions, then an injected AGENTS.md block.
        let mut e = entries();
        e.insert(2, Entry::text("dev", Role::System, Origin::Harness, "<skills_instructions>use skills</skills_instructions>"));
        e.insert(3, Entry::text("agents", Role::User, Origin::Harness, "# AGENTS.md instructions for /w\n\nrun make test"));
        e.insert(4, Entry::text("env", Role::User, Origin::Harness, "<environment_context>cwd /w</environment_context>"));
        let window = Window { protected_head: 1, tail_start: 8, token_target: 0 };
        let applied = apply(&e, &window, output("u1", "a2", vec![summary()]), "a-0000000000000000", &Tokenizer::default()).unwrap();
        let ids: Vec<&str> = applied.context.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["sys", "a-0000000000000000-r1", "dev", "agents", "u2"]);
        assert_eq!(applied.context[2], e[2], "verbatim");
        assert_eq!(applied.forgotten, ["u1", "env", "a1", "t1", "a2"], "the environment is history, not instructions");

        // The same instructions kept elsewhere (the agent repeated them): no second copy.
        let mut repeated = e.clone();
        repeated.insert(8, Entry { id: "dev2".into(), ..e[2].clone() });
        let window = Window { protected_head: 1, tail_start: 8, token_target: 0 };
        let applied = apply(&repeated, &window, output("u1", "a2", vec![summary()]), "a-0000000000000000", &Tokenizer::default()).unwrap();
        assert_eq!(applied.context.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["sys", "a-0000000000000000-r1", "agents", "dev2", "u2"]);
    }

    #[test]
    fn the_protected_head_and_verbatim_tail_are_out_of_reach() {
        assert!(matches!(check(&entries(), output("sys", "u1", vec![])), Err(StepError::Invariant(m)) if m.contains("protected head")));
        assert!(matches!(check(&entries(), output("a2", "u2", vec![])), Err(StepError::Invariant(m)) if m.contains("verbatim tail")));
    }

    #[test]
    fn unknown_or_reversed_ranges_are_invalid() {
        assert!(matches!(check(&entries(), output("zz", "a2", vec![])), Err(StepError::Invalid(_))));
        assert!(matches!(check(&entries(), output("a2", "u1", vec![])), Err(StepError::Invalid(_))));
    }

    #[test]
    fn splitting_a_call_from_its_result_is_refused_either_way() {
        assert!(matches!(check(&entries(), output("u1", "a1", vec![summary()])), Err(StepError::Invariant(m)) if m.contains("pairing")));
        assert!(matches!(check(&entries(), output("t1", "a2", vec![summary()])), Err(StepError::Invariant(m)) if m.contains("pairing")));
        // A replacement may not smuggle in a call without its result either.
        assert!(matches!(check(&entries(), output("a2", "a2", vec![call("", "c9")])), Err(StepError::Invariant(_))));
    }

    #[test]
    fn pre_existing_orphans_are_not_blamed_on_the_plugin() {
        let mut with_orphan = entries();
        with_orphan.insert(1, call("a0", "lost"));
        assert!(check(&with_orphan, output("u1", "u1", vec![summary()])).is_ok());
    }

    #[test]
    fn ids_may_be_reused_once_and_never_invented() {
        let mut kept = entries()[4].clone();
        assert!(check(&entries(), output("u1", "a2", vec![summary(), kept.clone()])).is_ok());
        assert!(matches!(check(&entries(), output("u1", "a2", vec![kept.clone(), kept.clone()])), Err(StepError::Invariant(m)) if m.contains("twice")));
        kept.id = "u2".into();
        assert!(matches!(check(&entries(), output("u1", "a2", vec![kept])), Err(StepError::Invariant(m)) if m.contains("invents")));
    }

    #[test]
    fn pinned_entries_come_out_verbatim_whatever_the_strategy_did() {
        let mut pinned = entries();
        pinned[4].pinned = true;
        let carried = pinned[4].clone();
        // Tokens are the host's count, redone on the way out; the content is what must not change.
        let kept = |applied: Applied| applied.context.iter().filter(|e| e.id == carried.id).map(|e| (e.parts.clone(), e.pinned)).collect::<Vec<_>>();
        let verbatim = [(carried.parts.clone(), true)];
        assert_eq!(kept(check(&pinned, output("u1", "a2", vec![summary(), carried.clone()])).unwrap()), verbatim);
        let dropped = check(&pinned, output("u1", "a2", vec![summary()])).unwrap();
        assert_eq!(kept(dropped.clone()), verbatim, "a dropped pin is carried back");
        assert!(!dropped.forgotten.contains(&carried.id));
        let mut changed = carried.clone();
        changed.parts = vec![Part::Text { text: "rewritten".into() }].into();
        assert_eq!(kept(check(&pinned, output("u1", "a2", vec![summary(), changed])).unwrap()), verbatim, "a changed pin is restored");
        let mut claimed = summary();
        claimed.pinned = true;
        assert!(matches!(check(&pinned, output("u1", "a2", vec![claimed])), Err(StepError::Invariant(m)) if m.contains("claims to be pinned")));
    }

    #[test]
    fn one_provider_response_is_replaced_whole_or_not_at_all() {
        // Reasoning and a call from one response, as Codex or the Responses API record them.
        let mut split = entries();
        split.insert(2, Entry { response: Some("resp_1".into()), ..text("r0", Role::Assistant) });
        split[3].response = Some("resp_1".into());
        split[3].reported_tokens = Some(1234);
        let window = Window { protected_head: 1, tail_start: 6, token_target: 0 };
        let tokenizer = &Tokenizer::default();
        let refused = apply(&split, &window, output("r0", "r0", vec![summary()]), "cmp-1", tokenizer);
        assert!(matches!(refused, Err(StepError::Invariant(m)) if m.contains("splits provider response resp_1 at entry r0")));
        // Whole: accepted, and a carried-on entry keeps what the contract does not carry.
        let mut carried = split[3].clone();
        carried.response = None;
        carried.reported_tokens = None;
        let applied = apply(&split, &window, output("u1", "t1", vec![summary(), carried, split[4].clone()]), "cmp-1", tokenizer).unwrap();
        let back = applied.replacement.iter().find(|e| e.id == "a1").unwrap();
        assert_eq!((back.response.as_deref(), back.reported_tokens), (Some("resp_1"), Some(1234)));
        // The host's own window never starts the tail inside a response either.
        assert!(!super::super::window::safe_cuts(&split)[3]);
    }
}
