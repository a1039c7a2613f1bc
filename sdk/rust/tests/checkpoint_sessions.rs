//! The deterministic checkpoint extraction on recorded Pi sessions (`../shared/transcripts/pi/`,
//! skipped where they are absent): what it finds, and what an extraction that starts from the
//! previous checkpoint finds.

use std::time::Instant;

use cairn_sdk::types;
#[path = "support/pi.rs"]
mod pi;
use pi::sessions;

use cairn_sdk::checkpoint::{self, Checkpoint};

fn quarter(text: &str) -> u32 {
    text.chars().count().div_ceil(4) as u32
}

fn median_ms(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

fn timed(runs: usize, mut f: impl FnMut()) -> f64 {
    median_ms(
        (0..runs)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect(),
    )
}

/// Where a turn starts: before each operator message.
fn turn_starts(entries: &[types::Entry]) -> Vec<usize> {
    entries.iter().enumerate().filter(|(_, e)| e.origin == types::Origin::Operator).map(|(at, _)| at).filter(|&at| at > 0).collect()
}

/// Equal, artifacts and overridden statements in any order (a later checkpoint keeps the
/// previous one's first).
fn assert_same_content(mut later: Checkpoint, mut whole: Checkpoint, what: &str) {
    later.external_artifacts.sort_by(|a, b| a.uri.cmp(&b.uri));
    whole.external_artifacts.sort_by(|a, b| a.uri.cmp(&b.uri));
    later.overridden.sort();
    whole.overridden.sort();
    assert_eq!(later, whole, "{what}");
}

/// Turn by turn through the recorded sessions, each checkpoint extracted from the one before
/// (reading only the entries since) holds what an extraction of the whole history holds
/// (checked at every 5th turn).
#[test]
fn a_later_checkpoint_from_the_previous_one_holds_what_a_whole_extraction_holds() {
    for (name, entries) in sessions() {
        let starts = turn_starts(&entries);
        let Some(&first) = starts.first() else { continue };
        let mut covered = first;
        let mut previous = checkpoint::extract_with(&entries[..covered], 4000, &quarter);
        for (n, &upto) in starts[1..].iter().enumerate() {
            let later = checkpoint::extract_since(&previous, &entries[..upto], &entries[covered - 1].id, 4000, &quarter);
            if n % 5 == 0 {
                assert_same_content(later.clone(), checkpoint::extract_with(&entries[..upto], 4000, &quarter), &format!("{name}, turn {n}: entries {covered}..{upto}"));
            }
            (previous, covered) = (later, upto);
        }
        // The last tenth at once, and an id the entries do not hold (the whole extraction).
        let covered = entries.len() * 9 / 10;
        let covered = starts.iter().copied().find(|&at| at >= covered).unwrap_or(covered);
        let previous = checkpoint::extract_with(&entries[..covered], 4000, &quarter);
        let whole = checkpoint::extract_with(&entries, 4000, &quarter);
        assert_same_content(checkpoint::extract_since(&previous, &entries, &entries[covered - 1].id, 4000, &quarter), whole.clone(), &format!("{name}: the last tenth"));
        assert_eq!(checkpoint::extract_since(&previous, &entries, "no-such-id", 4000, &quarter), checkpoint::carry_forward(Some(&previous), whole));
    }
}

/// What reading only the new entries saves, per recorded session (`cargo test --release --test
/// checkpoint_sessions -- --ignored --nocapture`): the whole extraction, and the later one after
/// the previous checkpoint covered all but the last tenth or all but the last turn.
#[test]
#[ignore = "prints timings"]
fn later_extraction_timings() {
    let runs = std::env::var("RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(21);
    for (name, entries) in sessions() {
        let starts = turn_starts(&entries);
        let whole = timed(runs, || drop(std::hint::black_box(checkpoint::extract_with(&entries, 4000, &quarter))));
        let mut line = format!("{name}: {} entries, whole {whole:.2} ms", entries.len());
        for (label, covered) in [("last tenth", starts.iter().copied().find(|&at| at >= entries.len() * 9 / 10)), ("last turn", starts.last().copied())] {
            let Some(covered) = covered else { continue };
            let previous = checkpoint::extract_with(&entries[..covered], 4000, &quarter);
            let id = &entries[covered - 1].id;
            let later = timed(runs, || drop(std::hint::black_box(checkpoint::extract_since(&previous, &entries, id, 4000, &quarter))));
            line.push_str(&format!(", from the previous ({label}, {} new entries) {later:.2} ms", entries.len() - covered));
        }
        println!("{line}");
    }
}

/// Each kind of operator statement the ledger keeps, found in what real operators wrote to Pi
/// (the recorded sessions, required under CI): quoted verbatim, values and all; pasted terminal
/// output, slash commands and stack traces are not statements.
#[test]
fn the_ledger_finds_each_kind_in_the_recorded_sessions() {
    let all = sessions();
    assert!(!all.is_empty() || std::env::var_os("CI").is_none(), "CI needs ../shared/transcripts/pi");
    let mut found = Checkpoint::default();
    for (_, entries) in &all {
        let cp = checkpoint::extract_with(entries, 100_000, &quarter);
        found.negative_constraints.extend(cp.negative_constraints);
        found.rules.extend(cp.rules);
        found.facts.extend(cp.facts);
        found.goal_state.extend(cp.goal_state);
        found.overridden.extend(cp.overridden);
        let families: std::collections::HashSet<&str> = cp.commands.iter().map(|c| c.family.as_str()).collect();
        assert_eq!(families.len(), cp.commands.len(), "one entry per command family");
        found.commands.extend(cp.commands);
    }
    if all.is_empty() {
        return;
    }
    let rule = |kind: &str, text: &str| found.rules.iter().any(|r| r.kind == kind && r.text == text);
    assert!(found.negative_constraints.iter().any(|c| c == "invalid themes must NEVER explode"), "prohibition: {:#?}", found.negative_constraints);
    assert!(found.negative_constraints.iter().any(|c| c == "should be dimmer, don't modify the theme, look into the footer sources"));
    assert!(rule("obligation", "we need to fix the tui test sources."), "obligation: {:#?}", found.rules);
    assert!(rule("obligation", "put it in coding-agent/test so i can execute it with npx tsx"));
    assert!(rule("preference", "i would only want e2e tests for AgentSession, anything else is shitty."), "preference: {:#?}\n{:#?}", found.rules, found.overridden);
    assert!(found.rules.iter().any(|r| r.kind == "process" && r.text.contains("queued up until user submits")), "process");
    assert!(found.facts.iter().any(|f| f == "green diff is #b5bd68"), "fact with its value: {:#?}", found.facts);
    assert!(found.facts.iter().any(|f| f == "tool error bg 3c2828"));
    assert!(found.goal_state.iter().any(|g| g == "ok, create a branch refactor"), "goal state: {:#?}", found.goal_state);
    // Commands by family with their exit status, where the output says it ("Command exited with code 1").
    assert!(found.commands.iter().any(|c| c.family == "npm run" && c.last.ends_with("npm run check")), "commands: {:#?}", found.commands);
    // Where a run failed, the command its call made holds the exit status the output gives.
    let failed = all.iter().find_map(|(_, entries)| {
        let at = entries.iter().position(|e| e.parts.iter().any(|p| matches!(p, types::Part::ToolResult(r) if r.content.contains("exited with code 1"))))?;
        Some(checkpoint::extract_with(&entries[..=at], 100_000, &quarter))
    });
    assert_eq!(failed.expect("a failed run in the recorded sessions").commands.last().map(|c| c.exit), Some(Some(1)));
    assert!(found.commands.iter().any(|c| c.family == "mv"), "a utility is its own family: {:#?}", found.commands);
    let everything: Vec<&String> = found.negative_constraints.iter().chain(&found.facts).chain(&found.goal_state).chain(found.rules.iter().map(|r| &r.text)).chain(&found.overridden).collect();
    for pasted in ["/mode", "xterm-256color", "at new Theme ("] {
        assert!(!everything.iter().any(|s| s.starts_with(pasted)), "{pasted:?} is pasted, not said");
    }
}
