//! The root objective, anchored. Summaries drift: after a few cycles "what the operator asked"
//! becomes whatever the latest request was. The conversation's first checkpoint quotes the
//! operator's first request; the host keeps that quote unchanged in every later checkpoint,
//! whatever a strategy wrote, and in the context the agent sees.

use super::Committed;
use crate::tokenizer::Tokenizer;
use crate::transcript::{Entry, Origin, Part};

/// Anchors the root objective on a committed outcome: the previous checkpoint's, else the
/// operator's first request in the record (`first_request`; an earlier compaction may have
/// taken it out of the context, so the context's first request is not it). The checkpoint
/// carries it; where the new context no longer quotes it, the outcome's summary entry does.
///
/// Under a budget the strategy has filled the context by value, and a usable window is a
/// ceiling: the quote is added to the context only without a budget and where it fits (the
/// checkpoint JSON carries it either way).
pub fn root_objective(committed: &mut Committed, previous_checkpoint: Option<&str>, first_request: Option<&str>, tokenizer: &Tokenizer, ceiling: Option<u64>, budgeted: bool) {
    let anchored = previous_checkpoint.and_then(|json| {
        let value: serde_json::Value = serde_json::from_str(json).ok()?;
        value.get("root_objective")?.as_str().map(str::to_string)
    });
    let first_request = || first_request.map(cairn_rules::intent::root_objective);
    let Some(anchor) = anchored.or_else(first_request).filter(|a| !a.is_empty()) else { return };

    if let Some(checkpoint) = &mut committed.checkpoint {
        if let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(checkpoint) {
            fields.insert("root_objective".into(), anchor.clone().into());
            *checkpoint = serde_json::Value::Object(fields).to_string();
        }
    }
    let applied = &mut committed.applied;
    let quoted = |e: &Entry| e.parts.iter().any(|p| matches!(p, Part::Text { text } if text.contains(anchor.as_str())));
    if applied.context.iter().any(quoted) {
        return;
    }
    let Some(n) = applied.replacement.iter().position(|e| e.origin == Origin::Summary).filter(|_| !budgeted) else { return };
    let mut summary = applied.replacement[n].clone();
    summary.parts.push(Part::Text { text: format!("\n\nRoot objective (the operator's first request, verbatim):\n{anchor}") });
    let before = summary.tokens as u64;
    tokenizer.count_entry(&mut summary);
    let tokens_after = applied.tokens_after - before + summary.tokens as u64;
    if ceiling.is_some_and(|ceiling| tokens_after > ceiling) {
        return;
    }
    applied.tokens_after = tokens_after;
    applied.replacement[n] = summary.clone();
    applied.context[applied.first + n] = summary;
}

/// Keeps the operator's `preserve` text (Pi's `/compact <text>`, an agent's request) in the
/// context the outcome leaves, verbatim, whatever the strategy did with it: model prompts
/// read it, model-free strategies cannot. Appended to the outcome's summary entry, else put
/// in an entry of its own at the end of the replacement.
pub fn preserve(committed: &mut Committed, preserve: Option<&str>, archive_id: &str, tokenizer: &Tokenizer) {
    let Some(preserve) = preserve.map(str::trim).filter(|p| !p.is_empty()) else { return };
    let applied = &mut committed.applied;
    let quoted = |e: &Entry| e.parts.iter().any(|p| matches!(p, Part::Text { text } if text.contains(preserve)));
    if applied.context.iter().any(quoted) {
        return;
    }
    let text = format!("The operator asked this compaction to keep (verbatim):\n{preserve}");
    let n = match applied.replacement.iter().position(|e| e.origin == Origin::Summary) {
        Some(n) => {
            applied.replacement[n].parts.push(Part::Text { text: format!("\n\n{text}") });
            n
        }
        None => {
            let entry = Entry::text(format!("{archive_id}-preserve"), crate::transcript::Role::User, Origin::Summary, text);
            applied.replacement.push(entry.clone());
            applied.context.insert(applied.first + applied.replacement.len() - 1, entry);
            applied.replacement.len() - 1
        }
    };
    let entry = &mut applied.replacement[n];
    let before = entry.tokens as u64;
    tokenizer.count_entry(entry);
    applied.tokens_after = applied.tokens_after - before + entry.tokens as u64;
    applied.context[applied.first + n] = entry.clone();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::Applied;
    use crate::transcript::Role;

    fn committed(context: Vec<Entry>, first: usize, replacement: usize, checkpoint: Option<&str>) -> Committed {
        let tokens_after = context.iter().map(|e| e.tokens as u64).sum();
        let applied = Applied { first, last: first, replacement: context[first..first + replacement].to_vec(), forgotten: Vec::new(), context, tokens_after };
        Committed { plugin: "p@1".into(), applied, artifacts: Vec::new(), checkpoint: checkpoint.map(String::from), seed: None, retrospective: None }
    }

    #[test]
    fn a_drifted_checkpoint_gets_the_first_request_back_in_the_record_and_the_context() {
        let tokenizer = Tokenizer::default();
        let original = [Entry::text("u1", Role::User, Origin::Operator, "Port the ledger to Decimal."), Entry::text("u2", Role::User, Origin::Operator, "now the tests")];
        let summary = Entry::text("s", Role::User, Origin::Summary, "## Objective\n- now the tests");
        let mut outcome = committed(vec![summary, original[1].clone()], 0, 1, Some(r#"{"task_objective":"now the tests"}"#));
        root_objective(&mut outcome, None, Some(&original[0].model_text()), &tokenizer, None, false);
        assert!(outcome.checkpoint.as_deref().unwrap().contains(r#""root_objective":"Port the ledger to Decimal.""#));
        assert!(outcome.applied.context[0].model_text().contains("Port the ledger to Decimal."), "the agent sees it");
        assert_eq!(outcome.applied.replacement[0], outcome.applied.context[0]);
        assert_eq!(outcome.applied.tokens_after, outcome.applied.context.iter().map(|e| e.tokens as u64).sum::<u64>());

        // A later cycle: the anchor is the previous checkpoint's, not the first request it sees.
        let previous = outcome.checkpoint.clone();
        let summary = Entry::text("s2", Role::User, Origin::Summary, "## Objective\n- now the docs");
        let mut later = committed(vec![summary], 0, 1, Some(r#"{"task_objective":"now the docs","root_objective":"something else"}"#));
        root_objective(&mut later, previous.as_deref(), Some("now the docs"), &tokenizer, None, false);
        assert!(later.checkpoint.as_deref().unwrap().contains(r#""root_objective":"Port the ledger to Decimal.""#), "immutable");
        assert!(later.applied.context[0].model_text().contains("Port the ledger to Decimal."));
    }

    /// `/compact keep the port` under a model-free chain: the words survive, once.
    #[test]
    fn preserve_text_is_kept_verbatim_with_or_without_a_summary() {
        let tokenizer = Tokenizer::default();
        let tail = Entry::text("u2", Role::User, Origin::Operator, "go on");
        // An elision: the replacement has no summary entry.
        let elided = Entry::text("r1", Role::Tool, Origin::Tool, "[elided]");
        let mut outcome = committed(vec![elided, tail.clone()], 0, 1, None);
        preserve(&mut outcome, Some(" keep port 8765 "), "a-1", &tokenizer);
        let context = &outcome.applied.context;
        assert_eq!(context.len(), 3);
        assert_eq!(context[1].id, "a-1-preserve");
        assert!(context[1].model_text().contains("keep port 8765"));
        assert_eq!(outcome.applied.replacement.last(), Some(&context[1]));
        assert_eq!(outcome.applied.tokens_after, context.iter().map(|e| e.tokens as u64).sum::<u64>());
        // Already quoted: nothing added.
        preserve(&mut outcome, Some("keep port 8765"), "a-1", &tokenizer);
        assert_eq!(outcome.applied.context.len(), 3);
        // A summary carries it.
        let summary = Entry::text("s", Role::User, Origin::Summary, "## Goal");
        let mut outcome = committed(vec![summary, tail], 0, 1, None);
        preserve(&mut outcome, Some("never touch vendor/"), "a-2", &tokenizer);
        assert_eq!(outcome.applied.context.len(), 2);
        assert!(outcome.applied.context[0].model_text().contains("never touch vendor/"));
    }
}
