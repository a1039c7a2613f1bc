//! The root objective, anchored. Summaries drift: after a few cycles "what the operator asked"
//! becomes whatever the latest request was. The conversation's first checkpoint quotes the
//! operator's first request; the host keeps that quote unchanged in every later checkpoint,
//! whatever a strategy wrote, and in the context the agent sees.

use super::Committed;
use crate::tokenizer::Tokenizer;
use crate::transcript::{Entry, Origin, Part, Role};

/// Anchors the root objective on a committed outcome: the previous checkpoint's, else the
/// first request in `entries`. The checkpoint carries it; where the new context no longer
/// quotes it, the outcome's summary entry does.
pub fn root_objective(committed: &mut Committed, previous_checkpoint: Option<&str>, entries: &[Entry], tokenizer: &Tokenizer) {
    let anchored = previous_checkpoint.and_then(|json| {
        let value: serde_json::Value = serde_json::from_str(json).ok()?;
        value.get("root_objective")?.as_str().map(str::to_string)
    });
    let first_request = || entries.iter().find(|e| e.role == Role::User && e.origin == Origin::Operator).map(|e| cairn_rules::intent::root_objective(&e.model_text()));
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
    let Some(n) = applied.replacement.iter().position(|e| e.origin == Origin::Summary) else { return };
    let summary = &mut applied.replacement[n];
    summary.parts.push(Part::Text { text: format!("\n\nRoot objective (the operator's first request, verbatim):\n{anchor}") });
    let before = summary.tokens as u64;
    tokenizer.count_entry(summary);
    applied.tokens_after = applied.tokens_after - before + summary.tokens as u64;
    applied.context[applied.first + n] = summary.clone();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::Applied;

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
        root_objective(&mut outcome, None, &original, &tokenizer);
        assert!(outcome.checkpoint.as_deref().unwrap().contains(r#""root_objective":"Port the ledger to Decimal.""#));
        assert!(outcome.applied.context[0].model_text().contains("Port the ledger to Decimal."), "the agent sees it");
        assert_eq!(outcome.applied.replacement[0], outcome.applied.context[0]);
        assert_eq!(outcome.applied.tokens_after, outcome.applied.context.iter().map(|e| e.tokens as u64).sum::<u64>());

        // A later cycle: the anchor is the previous checkpoint's, not the first request it sees.
        let previous = outcome.checkpoint.clone();
        let summary = Entry::text("s2", Role::User, Origin::Summary, "## Objective\n- now the docs");
        let mut later = committed(vec![summary], 0, 1, Some(r#"{"task_objective":"now the docs","root_objective":"something else"}"#));
        root_objective(&mut later, previous.as_deref(), &[Entry::text("u9", Role::User, Origin::Operator, "now the docs")], &tokenizer);
        assert!(later.checkpoint.as_deref().unwrap().contains(r#""root_objective":"Port the ledger to Decimal.""#), "immutable");
        assert!(later.applied.context[0].model_text().contains("Port the ledger to Decimal."));
    }
}
