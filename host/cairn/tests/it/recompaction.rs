//! Re-compaction is idempotent: the checkpoint Cairn writes into a context, written in every
//! format Cairn writes and read back (each round in a fresh home, so nothing but the text
//! carries it), is merged into the next checkpoint and never read as the operator's words.
//! Five rounds over the same facts keep every fact once, within the budget; a value the
//! operator updated stands alone, the old one gone from the context.

use cairn::storage::{ConversationKey, Home};
use cairn::transcript::formats::{self, Format};
use cairn::transcript::{Entry, Origin, Role, Transcript};
use cairn::RunOptions;

use crate::support;

/// What the operator says once, early: a rule of each form, facts with values, goal state, a decision.
const PLANTED: [&str; 8] = [
    "Never force-push to the release branch.",
    "Always run cargo fmt before a commit.",
    "Wait for my go-ahead before publishing the crate.",
    "I prefer answers as short bullet lists.",
    "The staging database is Postgres 16 at db.stage.internal:5433.",
    "Eval cases QX-101 and QX-202 are failing; fix QX-101 first.",
    "New plan: port the tokenizer to the bpe crate.",
    "Budget cap is $300 total. Never exceed without explicit approval.",
];
/// Said in round 3: supersedes the last planted statement.
const UPDATE: &str = "Budget cap is $700 total. Never exceed without explicit approval.";
const BUDGET: u64 = 900;

fn entry(n: &mut usize, role: Role, origin: Origin, text: &str) -> Entry {
    *n += 1;
    Entry::text(format!("e{n}"), role, origin, text)
}

/// A turn of chatter: an operator message with nothing to keep and a long agent reply.
fn chatter(n: &mut usize, round: usize) -> Vec<Entry> {
    let reply = format!("Looked at the module layout again in round {round}; nothing else changed. ").repeat(12);
    vec![entry(n, Role::User, Origin::Operator, &format!("Let's look at the layout again, pass {round}.")), entry(n, Role::Assistant, Origin::Agent, &reply)]
}

fn context_text(t: &Transcript) -> String {
    t.entries.iter().map(|e| e.model_text()).collect::<Vec<_>>().join("\n")
}

#[test]
fn five_rounds_in_every_format_keep_every_fact_once() {
    let cairn = support::host();
    let policy = cairn.default_policy().unwrap();
    for format in [Format::Cairn, Format::OpenAi, Format::Anthropic, Format::Pi] {
        let mut n = 0;
        let mut entries = vec![entry(&mut n, Role::System, Origin::Harness, "You are a coding agent.")];
        for planted in PLANTED {
            entries.push(entry(&mut n, Role::User, Origin::Operator, planted));
            entries.push(entry(&mut n, Role::Assistant, Origin::Agent, "Noted."));
            entries.extend(chatter(&mut n, 0));
        }
        let mut context = Transcript::new(entries);
        for round in 1..=5 {
            if round == 3 {
                context.entries.push(entry(&mut n, Role::User, Origin::Operator, UPDATE));
                context.entries.push(entry(&mut n, Role::Assistant, Origin::Agent, "Noted."));
            }
            for _ in 0..6 {
                context.entries.extend(chatter(&mut n, round));
            }
            let dir = tempfile::tempdir().unwrap();
            let home = Home::open(dir.path()).unwrap();
            let mut store = home.conversation(&ConversationKey::parse("rounds").unwrap()).unwrap();
            let report = cairn.compact_with(&policy, &mut store, &context, "rounds", RunOptions { budget: Some(BUDGET), ..RunOptions::default() }).unwrap();
            assert!(report.committed, "{format} round {round}: {} tokens: {:?}", report.tokens_before, report.not_committed);
            assert!(report.tokens_after <= BUDGET, "{format} round {round}: {} tokens over the budget of {BUDGET}", report.tokens_after);
            let written = formats::write(format, &report.transcript).unwrap();
            context = formats::parse_as(format, &written, "rounds").unwrap();
            let own: Vec<&Entry> = context.entries.iter().filter(|e| e.model_text().contains(cairn_rules::intent::CHECKPOINT_TITLE)).collect();
            assert_eq!(own.len(), 1, "{format} round {round}: one checkpoint in the context");
            assert_eq!(own[0].origin, Origin::Summary, "{format} round {round}: read back as Cairn's, not the operator's");
        }
        let text = context_text(&context);
        for planted in PLANTED.iter().take(PLANTED.len() - 1).chain([&UPDATE]) {
            assert_eq!(text.matches(planted).count(), 1, "{format}: {planted:?} once in\n{text}");
        }
        assert!(!text.contains("$300"), "{format}: the superseded cap is gone from the context:\n{text}");
        assert!(!text.contains("- - "), "{format}: no item nested in itself:\n{text}");
    }
}

#[test]
fn a_budget_fills_by_value_and_says_what_it_left_out() {
    let cairn = support::host();
    let policy = cairn.default_policy().unwrap();
    let mut n = 0;
    let mut entries = vec![entry(&mut n, Role::System, Origin::Harness, "You are a coding agent.")];
    for planted in PLANTED {
        entries.push(entry(&mut n, Role::User, Origin::Operator, planted));
        entries.extend(chatter(&mut n, 0));
    }
    const SERVICES: [&str; 30] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
        "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber", "basalt", "cobalt", "dune",
    ];
    for (i, service) in SERVICES.iter().enumerate() {
        entries.push(entry(&mut n, Role::User, Origin::Operator, &format!("The {service} service listens on port {} of builder.internal.", 7000 + i)));
        entries.extend(chatter(&mut n, i));
    }
    let context = Transcript::new(entries);
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("tight").unwrap()).unwrap();
    let budget = 400;
    let report = cairn.compact_with(&policy, &mut store, &context, "tight", RunOptions { budget: Some(budget), ..RunOptions::default() }).unwrap();
    assert!(report.committed && report.tokens_after <= budget, "{} tokens for a budget of {budget}: {:?}", report.tokens_after, report.over_window);
    let text = context_text(&report.transcript);
    // The operator's rules come first; the many facts after them, as far as they go.
    for rule in &PLANTED[..4] {
        assert!(text.contains(rule), "{rule:?} kept:\n{text}");
    }
    assert!(report.left_out.get("facts").is_some_and(|&n| n > 0), "{:?}", report.left_out);
    assert!(text.contains("Left out for the budget"), "{text}");
    // The record's checkpoint keeps every fact the context left out.
    let checkpoint: serde_json::Value = serde_json::from_str(report.checkpoint.as_deref().unwrap()).unwrap();
    assert_eq!(checkpoint["facts"].as_array().unwrap().iter().filter(|f| f.as_str().unwrap().contains("builder.internal")).count(), 30);
}

/// Below the floor — the system prompt alone over the budget — the result is what nothing may
/// drop, reported `degraded` with what takes the room, the checkpoint included.
#[test]
fn below_the_floor_the_report_says_what_takes_the_room() {
    let cairn = support::host();
    let policy = cairn.default_policy().unwrap();
    let mut n = 0;
    let mut entries = vec![entry(&mut n, Role::System, Origin::Harness, &"You are a coding agent. Follow the house rules. ".repeat(20))];
    for planted in PLANTED {
        entries.push(entry(&mut n, Role::User, Origin::Operator, planted));
        entries.extend(chatter(&mut n, 0));
    }
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("floor").unwrap()).unwrap();
    let report = cairn.compact_with(&policy, &mut store, &Transcript::new(entries), "floor", RunOptions { budget: Some(60), ..RunOptions::default() }).unwrap();
    assert!(report.degraded, "{report:?}");
    let why = report.over_window.as_deref().unwrap();
    assert!(why.contains("over the budget of 60") && why.contains("the checkpoint ") && why.contains("the system prompt"), "{why}");
}
