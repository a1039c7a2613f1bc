//! 11. The window is already exceeded when maintenance runs: the newest tool output alone is
//!     over it (an 80,000-token output in a 64k window, a 3 MB log in a 128k window). The agent's
//!     next request must fit the usable window (window less reserve), the output must come back
//!     byte for byte from the artifact its placeholder names, and the operator's rule of
//!     buried-constraint must survive.

use cairn::lifecycle::{Action, BoundaryReport, Usage};
use cairn::storage::{ArtifactUri, ConversationKey};
use cairn::transcript::{Entry, Origin, Part, Role};
use cairn::RunOptions;

use super::buried_constraint::RULE;
use super::{Cycle, Scenario, Score};
use crate::commands::eval::lab::{grown, text, tool_result, with_first_request};
use crate::commands::eval::Lab;

/// The reserve for the model's answer (as `cairn boundary` assumes by default).
const RESERVE: u64 = 16_384;

pub struct FullContext;

impl Scenario for FullContext {
    fn name(&self) -> &'static str {
        "full-context"
    }

    fn run(&self, lab: &Lab) -> anyhow::Result<Score> {
        let (session, base) = lab.session("openai-chat")?;
        let base = with_first_request(base, RULE);
        let counter = lab.cairn.tokenizer();
        let json = json_output(80_000, &counter);
        let log = build_log(3_000_000);
        let cases = [("80k-token output", 64_000, "fc-json", json), ("3 MB log", 128_000, "fc-log", log)];
        let mut tokens = Vec::new();
        let (mut passed, mut lines) = (true, Vec::new());
        for (what, window, key, output) in cases {
            let call = format!("{key}-call");
            let context = grown(&base, newest_call(key, &call, output.clone()));
            let usable = window - RESERVE;
            let outcome = lab.lifecycle()?.boundary_blocking(BoundaryReport {
                conversation: ConversationKey::parse(key)?,
                turn: context.entries.last().map_or(1, |e| e.turn.max(1)),
                turn_complete: true,
                tool_call_outstanding: false,
                window,
                reserve: RESERVE,
                usage: Usage::Counted,
                transcript: context.clone(),
            })?;
            // A policy with no trigger never acts on its own: the harness compacts with the
            // usable window it knows (`cairn compact --window`, the MCP `compact` tool's `window`).
            let (report, action, how) = match outcome.report {
                Some(report) => (report, outcome.action, "at the boundary"),
                None => {
                    let mut store = lab.home.conversation(&ConversationKey::parse(&format!("{key}-asked"))?)?;
                    let report = lab.cairn.compact_with(&lab.policy, &mut store, &context, key, RunOptions { window: Some(usable), ..RunOptions::default() })?;
                    let action = if report.committed { Action::Compacted } else { Action::Failed };
                    (report, action, "asked (the policy has no trigger)")
                }
            };
            tokens.push(Cycle::from(&report));
            let mut after = report.transcript.clone();
            counter.count_transcript(&mut after);
            let fits = matches!(action, Action::Compacted | Action::HandedOver) && after.total_tokens() <= usable && report.over_window.is_none();
            let recovered = recover(lab, &report, &call, &output)?;
            let rule = text(&report.transcript).contains(RULE);
            passed &= fits && recovered.is_ok() && rule;
            lines.push(format!(
                "{what} in a {}k window, {how}: {} → {} tokens ({}, usable {usable}); {}; {}",
                window / 1000,
                report.tokens_before,
                after.total_tokens(),
                if fits { "fits".to_string() } else { format!("does not fit: {action:?}, {}", report.over_window.as_deref().unwrap_or("")) },
                match recovered {
                    Ok(uri) => format!("{uri} returns it byte for byte"),
                    Err(why) => why,
                },
                if rule { "the rule is verbatim in the context" } else { "the rule is gone" },
            ));
        }
        Ok(Score::new(passed, format!("{session}: {}", lines.join("; ")), tokens))
    }
}

/// The newest turn: one tool call and its (huge) output.
fn newest_call(key: &str, call: &str, output: String) -> Vec<Entry> {
    vec![
        Entry {
            parts: vec![Part::Text { text: "Reading the whole output.".into() }, Part::ToolCall { id: call.into(), name: "bash".into(), args: r#"{"command":"cat output.log"}"#.into() }].into(),
            ..Entry::text(format!("{key}-work"), Role::Assistant, Origin::Agent, "")
        },
        tool_result(&format!("{key}-output"), call, output),
    ]
}

/// Whether the output of `call` is in the context as a placeholder whose artifact is `original`
/// byte for byte: `Ok(uri)`, else what is wrong. Under `--budget` the checkpoint may condense
/// the call and its output instead, when the archive keeps the output byte for byte.
fn recover(lab: &Lab, report: &cairn::CompactionReport, call: &str, original: &str) -> anyhow::Result<Result<String, String>> {
    let found = report.transcript.entries.iter().flat_map(|e| &e.parts).find_map(|p| match p {
        Part::ToolResult { call_id, elided, content, .. } if call_id == call => Some((elided.clone(), content.len())),
        _ => None,
    });
    Ok(match found {
        None if lab.budget.is_some() => {
            let archive = report.archive.as_deref().unwrap_or_default();
            let store = lab.home.existing_conversation(&ConversationKey::parse(&report.conversation)?)?;
            let kept = store.archived_originals(archive)?.iter().flat_map(|e| e.parts.iter()).any(|p| matches!(p, Part::ToolResult { call_id, content, .. } if call_id == call && content == original));
            if kept {
                Ok(format!("condensed with its call for the budget; archive {archive}"))
            } else {
                Err(format!("the output's call is gone, and archive {archive} does not hold the output"))
            }
        }
        None => Err("the output's call is gone".into()),
        Some((None, bytes)) => Err(format!("the output is in the context whole ({bytes} bytes)")),
        Some((Some(uri), _)) => {
            if lab.home.find_artifact(&uri.parse::<ArtifactUri>()?)? == original.as_bytes() {
                Ok(uri)
            } else {
                Err(format!("{uri} differs from the output"))
            }
        }
    })
}

/// A JSON array of rows, at least `tokens` tokens long.
fn json_output(tokens: u32, counter: &cairn::tokenizer::Tokenizer) -> String {
    let rows = |n: usize| -> String {
        let rows: Vec<serde_json::Value> = (0..n).map(|i| serde_json::json!({"id": i, "status": if i % 7 == 0 { "failed" } else { "ok" }, "host": format!("node-{}", i % 97)})).collect();
        serde_json::to_string(&rows).expect("rows serialize")
    };
    let mut n = 5_000;
    loop {
        let text = rows(n);
        let counted = counter.count(&text);
        if counted >= tokens {
            return text;
        }
        n = n * tokens as usize / counted.max(1) as usize + 100;
    }
}

/// A build log of at least `bytes` bytes, every line different.
fn build_log(bytes: usize) -> String {
    let mut log = String::with_capacity(bytes + 200);
    let mut n = 0u64;
    while log.len() < bytes {
        let x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        log.push_str(&format!(
            "2026-12-01T16:{:02}:{:02}.{:03}Z INFO worker-{} compiled crate_{n}/src/module_{}.rs in {}ms\n",
            (n / 60_000) % 60,
            (n / 1_000) % 60,
            n % 1_000,
            x % 16,
            (x >> 8) % 400,
            (x >> 20) % 5_000
        ));
        n += 1;
    }
    log
}
