//! The lifecycle as a harness drives it: unknown usage, thresholds, cooldown, agent requests,
//! deferral while a tool runs, the no-progress pause and at-least-once notices.

use crate::support;

use cairn::lifecycle::{Action, AgentRequest, BoundaryReport, ConversationState, RequestKind, Usage};
use cairn::record::{Event, OutcomeClass};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{sample, Transcript};
use cairn::Lifecycle;

fn lifecycle(home: &std::path::Path, policy_text: &str) -> Lifecycle {
    let cairn = support::host();
    let policy = support::policy(&cairn, policy_text);
    Lifecycle::new(cairn, Home::open(home).unwrap(), policy)
}

/// The embedded default with its first stage alone as a `[[chain]]`: these tests are about the
/// lifecycle, and edit the chain.
fn default_policy() -> String {
    let text = cairn::policy::DEFAULT_POLICY;
    let (start, end) = (text.find("[[stage]]").unwrap(), text.find("# Handover").unwrap());
    let chain = "[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n\n[chain.config]\nmin_tokens = 200\nprotected_tools = []\n\n";
    format!("{}{chain}{}", &text[..start], &text[end..])
}

fn key() -> ConversationKey {
    ConversationKey::parse("life").unwrap()
}

/// The session's tokens as the host counts them.
fn size(t: &Transcript) -> u64 {
    let mut t = t.clone();
    cairn::tokenizer::Tokenizer::default().count_transcript(&mut t);
    t.total_tokens()
}

fn report(turn: u32, window: u64, usage: Usage, transcript: &Transcript) -> BoundaryReport {
    BoundaryReport { conversation: key(), turn, turn_complete: true, tool_call_outstanding: false, window, reserve: 0, usage, transcript: transcript.clone() }
}

/// A window in which `t` fills `share` of it.
fn window_for(t: &Transcript, share: f64) -> u64 {
    (size(t) as f64 / share) as u64
}

#[tokio::test]
async fn unknown_usage_means_no_automatic_action() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let outcome = life.boundary(report(10, window_for(&t, 0.99), Usage::Unknown, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::None);
    assert_eq!(outcome.usage, None);
    let store = Home::open(dir.path()).unwrap().existing_conversation(&key()).unwrap();
    // Every boundary records the entries it is new to; nothing else ran.
    assert!(store.events().iter().all(|e| matches!(e, Event::Snapshot { .. })), "nothing ran");
    assert_eq!(store.context().unwrap().len(), t.entries.len());
}

#[tokio::test]
async fn reported_usage_plus_host_counts_drive_advice_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.50);
    // The provider reported 60% of the window before the last 2 entries; the host adds them.
    let reported = (window as f64 * 0.60) as u64;
    let outcome = life.boundary(report(10, window, Usage::Reported { tokens: reported, entries_after: 2 }, &t)).await.unwrap();
    assert!(outcome.usage.unwrap() > reported);
    assert_eq!(outcome.action, Action::Advised, "{outcome:?}");
    assert!(outcome.advice.unwrap().contains("% of the window"));
    // Not on turn 11: advice comes every 5th turn.
    let outcome = life.boundary(report(11, window, Usage::Reported { tokens: reported, entries_after: 2 }, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::None);
    // 80%: compact; the next boundary is inside the cooldown.
    let tokens = (window as f64 * 0.80) as u64;
    let outcome = life.boundary(report(12, window, Usage::Reported { tokens, entries_after: 0 }, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "{outcome:?}");
    assert!(size(&outcome.transcript) < size(&t));
    let outcome = life.boundary(report(13, window, Usage::Reported { tokens, entries_after: 0 }, &t)).await.unwrap();
    assert!(!matches!(outcome.action, Action::Compacted | Action::HandedOver), "{outcome:?}");
}

#[tokio::test]
async fn a_request_during_the_cooldown_stays_pending_then_runs_with_its_instructions() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.80);
    assert_eq!(life.boundary(report(20, window, Usage::Counted, &t)).await.unwrap().action, Action::Compacted);
    let request = AgentRequest { kind: RequestKind::Compact, preserve: "the failing test name".into(), resume: "rerun the suite".into() };
    life.request(key(), request).await.unwrap();
    let small = window * 10;
    for turn in 21..25 {
        let outcome = life.boundary(report(turn, small, Usage::Counted, &t)).await.unwrap();
        // Without the undo, turn 16 would compact: the compaction's own cooldown ended at 15.
        assert!(!matches!(outcome.action, Action::Compacted | Action::HandedOver), "turn {turn}: {:?}", outcome.action);
    }
    let outcome = life.boundary(report(25, small, Usage::Counted, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "the request runs once the cooldown is over, whatever the usage");
    // Survives a restart: a new host on the same home sees the cooldown just reserved.
    let life = lifecycle(dir.path(), &default_policy());
    let outcome = life.boundary(report(26, window, Usage::Counted, &t)).await.unwrap();
    assert!(!matches!(outcome.action, Action::Compacted), "{outcome:?}");
}

#[tokio::test]
async fn nothing_is_swapped_while_a_tool_runs() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.80);
    let mut busy = report(30, window, Usage::Counted, &t);
    busy.tool_call_outstanding = true;
    let outcome = life.boundary(busy).await.unwrap();
    assert!(matches!(&outcome.action, Action::Deferred(why) if why.contains("tool")), "{outcome:?}");
    let mut incomplete = report(30, window, Usage::Counted, &t);
    incomplete.turn_complete = false;
    assert!(matches!(life.boundary(incomplete).await.unwrap().action, Action::Deferred(_)));
    // The deferral reserved nothing: the next boundary compacts.
    assert_eq!(life.boundary(report(31, window, Usage::Counted, &t)).await.unwrap().action, Action::Compacted);
}

#[tokio::test]
async fn passes_that_free_too_little_pause_automatic_maintenance_with_one_notice() {
    let dir = tempfile::tempdir().unwrap();
    let policy = default_policy().replace("cooldown_turns = 5", "cooldown_turns = 1").replace("min_freed_ratio = 0.10", "min_freed_ratio = 0.99");
    let life = lifecycle(dir.path(), &policy);
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.80);
    for turn in 1..=3 {
        assert_eq!(life.boundary(report(turn, window, Usage::Counted, &t)).await.unwrap().action, Action::Compacted);
    }
    assert_eq!(life.boundary(report(4, window, Usage::Counted, &t)).await.unwrap().action, Action::Paused);
    assert_eq!(life.boundary(report(5, window, Usage::Counted, &t)).await.unwrap().action, Action::Paused);
    let notices = life.take_notices(key()).await.unwrap();
    assert_eq!(notices.iter().filter(|n| n.kind == "paused").count(), 1);
    assert_eq!(notices.iter().filter(|n| n.kind == "compacted").count(), 3);
    // An agent request still runs while paused.
    life.request(key(), AgentRequest { kind: RequestKind::Compact, preserve: String::new(), resume: String::new() }).await.unwrap();
    assert_eq!(life.boundary(report(6, window, Usage::Counted, &t)).await.unwrap().action, Action::Compacted);
}

#[tokio::test]
async fn notices_come_back_until_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let outcome = life.boundary(report(10, window_for(&t, 0.80), Usage::Counted, &t)).await.unwrap();
    assert_eq!(outcome.notices.len(), 1);
    let first = life.take_notices(key()).await.unwrap();
    let again = life.take_notices(key()).await.unwrap();
    assert_eq!(first, again, "at least once, same ids");
    assert_eq!(first[0].id, outcome.notices[0]);
    life.acknowledge(key(), first[0].id.clone()).await.unwrap();
    assert!(life.take_notices(key()).await.unwrap().is_empty());
    assert!(life.acknowledge(key(), "n-unknown".into()).await.is_err());
}

#[tokio::test]
async fn a_failed_maintenance_is_recorded_and_its_notice_says_nothing_of_the_error() {
    let dir = tempfile::tempdir().unwrap();
    // Only a trapping plugin, and a context the last resort cannot shrink.
    let policy = default_policy().replace("plugin = \"shake-elide\"", "plugin = \"misbehave\"\nconfig = { mode = \"trap\" }").replace("[chain.config]\nmin_tokens = 200\nprotected_tools = []\n", "");
    let life = lifecycle(dir.path(), &policy);
    let t = Transcript::new(sample::coding_session(1).entries[..2].to_vec());
    let outcome = life.boundary(report(5, window_for(&t, 0.9), Usage::Counted, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Failed, "{outcome:?}");
    let notices = life.take_notices(key()).await.unwrap();
    assert_eq!(notices[0].kind, "failed");
    assert!(!notices[0].text.contains("trap") && !notices[0].text.contains("misbehave"), "{}", notices[0].text);
    let store = Home::open(dir.path()).unwrap().existing_conversation(&key()).unwrap();
    assert!(store.events().iter().any(|e| matches!(e, Event::Compaction(c) if c.committed_by.is_none() && c.steps[0].outcome == OutcomeClass::Trap)));
}

/// A policy whose trigger and commit policy are the misbehaving fixtures (or well-behaved
/// bundled ones), with tight limits so a loop or a memory bomb ends quickly.
fn fixture_policy(trigger: &str, commit: &str) -> String {
    format!(
        "[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n\n\
         [trigger]\n{trigger}\ngrants = [\"log\"]\nmemory_mib = 16\ntimeout_ms = 300\n\n\
         [commit]\n{commit}\ngrants = [\"log\"]\nmemory_mib = 16\ntimeout_ms = 300\n"
    )
}

fn misbehaving(plugin: &str, mode: &str) -> String {
    format!("plugin = \"{plugin}\"\nconfig = {{ mode = \"{mode}\" }}")
}

#[tokio::test]
async fn a_failing_trigger_fails_open_to_the_reserve_rule_with_one_notice() {
    let t = sample::coding_session(10);
    for (mode, class) in [("trap", "trap"), ("loop", "timeout"), ("oom", "oom"), ("garbage", "invalid")] {
        let dir = tempfile::tempdir().unwrap();
        let life = lifecycle(dir.path(), &fixture_policy(&misbehaving("misbehave-trigger", mode), "plugin = \"commit-turn-boundary\""));
        // Plenty of room: the reserve rule does nothing, and the lifecycle still answers.
        let started = std::time::Instant::now();
        let calm = life.boundary(report(3, window_for(&t, 0.2), Usage::Counted, &t)).await.unwrap();
        assert_eq!(calm.action, Action::None, "{mode}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{mode}: took {:?}", started.elapsed());
        let notices = life.take_notices(key()).await.unwrap();
        assert_eq!(notices.len(), 1, "{mode}: {notices:?}");
        assert_eq!(notices[0].kind, "plugin-failed");
        assert!(notices[0].text.contains(&format!("misbehave-trigger@0.1.0 failed ({class})")), "{mode}: {}", notices[0].text);

        // Past the reserve: the host's rule compacts, and no second notice for the same streak.
        let full = life.boundary(report(4, window_for(&t, 0.99), Usage::Counted, &t)).await.unwrap();
        assert_eq!(full.action, Action::Compacted, "{mode}: {full:?}");
        let kinds: Vec<String> = life.take_notices(key()).await.unwrap().into_iter().map(|n| n.kind).collect();
        assert_eq!(kinds, ["plugin-failed", "compacted"], "{mode}");
    }
}

#[tokio::test]
async fn a_failing_commit_policy_falls_back_to_the_boundary_rule() {
    let t = sample::coding_session(10);
    for (mode, class) in [("trap", "trap"), ("loop", "timeout"), ("oom", "oom"), ("garbage", "invalid")] {
        let dir = tempfile::tempdir().unwrap();
        let life = lifecycle(dir.path(), &fixture_policy(&misbehaving("misbehave-trigger", "compact"), &misbehaving("misbehave-commit", mode)));
        let mut busy = report(3, window_for(&t, 0.5), Usage::Counted, &t);
        busy.tool_call_outstanding = true;
        let outcome = life.boundary(busy).await.unwrap();
        assert!(matches!(&outcome.action, Action::Deferred(why) if why.contains("tool call")), "{mode}: {outcome:?}");
        let notices = life.take_notices(key()).await.unwrap();
        assert!(notices[0].text.contains(&format!("misbehave-commit@0.1.0 failed ({class})")), "{mode}: {}", notices[0].text);

        let quiet = life.boundary(report(4, window_for(&t, 0.5), Usage::Counted, &t)).await.unwrap();
        assert_eq!(quiet.action, Action::Compacted, "{mode}: {quiet:?}");
    }
}

#[tokio::test]
async fn a_trigger_that_answers_again_is_obeyed_again() {
    let dir = tempfile::tempdir().unwrap();
    let t = sample::coding_session(10);
    let life = lifecycle(dir.path(), &fixture_policy(&misbehaving("misbehave-trigger", "trap"), "plugin = \"commit-turn-boundary\""));
    life.boundary(report(3, window_for(&t, 0.2), Usage::Counted, &t)).await.unwrap();
    let store = Home::open(dir.path()).unwrap().existing_conversation(&key()).unwrap();
    let state: cairn::lifecycle::ConversationState = store.load_state().unwrap().unwrap();
    assert_eq!(state.failing_plugins, ["misbehave-trigger@0.1.0"]);

    // The same home under a policy whose trigger works: the failure streak ends.
    let life = lifecycle(dir.path(), &fixture_policy(&misbehaving("misbehave-trigger", "compact"), "plugin = \"commit-turn-boundary\""));
    let outcome = life.boundary(report(4, window_for(&t, 0.2), Usage::Counted, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "the working trigger's decision is obeyed");
    let state: cairn::lifecycle::ConversationState = store.load_state().unwrap().unwrap();
    assert!(state.failing_plugins.is_empty());
}

/// The default policy with a summary step (checkpoint-json, deterministic without a model)
/// before shake-elide's elision.
fn summary_then_elide() -> String {
    default_policy().replace("[[chain]]\nplugin = \"shake-elide\"", "[[chain]]\nplugin = \"checkpoint-json\"\ngrants = [\"log\", \"tokens\"]\n\n[[chain]]\nplugin = \"shake-elide\"")
}

/// `t` with an earlier compaction's summary, pinned, right after the system prompt: no new
/// outcome can replace it.
fn with_old_summary(t: &Transcript) -> Transcript {
    let mut entries = t.entries.clone();
    let mut summary = cairn::transcript::Entry::text("old-summary", cairn::transcript::Role::User, cairn::transcript::Origin::Summary, "## Goal\nan earlier summary");
    summary.pinned = true;
    entries.insert(1, summary);
    Transcript::new(entries)
}

#[tokio::test]
async fn a_refused_outcome_passes_the_turn_to_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &summary_then_elide());
    let t = with_old_summary(&sample::coding_session(10));
    let outcome = life.boundary(report(10, window_for(&t, 0.80), Usage::Counted, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "{outcome:#?}");
    let steps = &outcome.report.as_ref().unwrap().steps;
    // A new summary beside the old one would leave it stale: refused; the elision beside it
    // is fine and commits.
    assert_eq!(steps[0].outcome, OutcomeClass::Rejected, "{steps:#?}");
    assert!(steps[0].message.as_deref().unwrap().contains("old-summary"));
    assert!(steps[1].plugin.starts_with("shake-elide@") && steps[1].outcome == OutcomeClass::Ok, "{steps:#?}");
}

#[tokio::test]
async fn a_summary_beside_a_handover_seed_is_not_stale() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &summary_then_elide());
    let t = sample::coding_session(10);
    life.request(key(), AgentRequest { kind: RequestKind::Handover, preserve: String::new(), resume: String::new() }).await.unwrap();
    let handed = life.boundary(report(10, window_for(&t, 0.3), Usage::Counted, &t)).await.unwrap();
    assert_eq!(handed.action, Action::HandedOver, "{handed:#?}");
    // The new session: its seed, then a long stretch of new work.
    let later = sample::coding_session(10);
    let mut entries = handed.transcript.entries.clone();
    entries.extend(later.entries.iter().skip(1).map(|e| cairn::transcript::Entry { id: format!("new-{}", e.id), ..e.clone() }));
    let next = Transcript::new(entries);
    let outcome = life.boundary(report(20, window_for(&next, 0.80), Usage::Counted, &next)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "{outcome:#?}");
    let steps = &outcome.report.as_ref().unwrap().steps;
    assert!(steps[0].plugin.starts_with("checkpoint-json@") && steps[0].outcome == OutcomeClass::Ok, "{steps:#?}");
}

#[tokio::test]
async fn a_pause_ends_after_its_turns_by_the_switch_or_by_a_successful_request() {
    let dir = tempfile::tempdir().unwrap();
    let policy = default_policy().replace("cooldown_turns = 5", "cooldown_turns = 1").replace("min_freed_ratio = 0.10", "min_freed_ratio = 0.99\nresume_after_turns = 4");
    let life = lifecycle(dir.path(), &policy);
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.80);
    for turn in 1..=3 {
        life.boundary(report(turn, window, Usage::Counted, &t)).await.unwrap();
    }
    assert_eq!(life.boundary(report(4, window, Usage::Counted, &t)).await.unwrap().action, Action::Paused);
    // Paused at turn 3: four turns later it resumes by itself, with a notice.
    assert_ne!(life.boundary(report(7, window, Usage::Counted, &t)).await.unwrap().action, Action::Paused);
    let kinds: Vec<String> = life.take_notices(key()).await.unwrap().into_iter().map(|n| n.kind).collect();
    assert!(kinds.contains(&"resumed".to_string()), "{kinds:?}");

    // The operator's switch.
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &policy.replace("resume_after_turns = 4", "resume_after_turns = 0"));
    for turn in 1..=3 {
        life.boundary(report(turn, window, Usage::Counted, &t)).await.unwrap();
    }
    assert_eq!(life.boundary(report(40, window, Usage::Counted, &t)).await.unwrap().action, Action::Paused, "0 never resumes by itself");
    life.resume(key()).await.unwrap();
    assert_ne!(life.boundary(report(41, window, Usage::Counted, &t)).await.unwrap().action, Action::Paused);
}

#[tokio::test]
async fn owed_notices_reach_the_outbox_when_notices_are_taken() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    // A crash between saving the state and queueing its notice leaves it owed.
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&key()).unwrap();
    let owed = cairn::record::Notice { id: "n-owed".into(), kind: "compacted".into(), text: "owed".into(), at: 1 };
    store.save_state(&cairn::lifecycle::ConversationState { owed_notices: vec![owed], ..Default::default() }).unwrap();
    drop(store);
    let notices = life.take_notices(key()).await.unwrap();
    assert_eq!(notices.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["n-owed"]);
    assert_eq!(life.deliver_owed_notices().unwrap(), 0, "delivered once");
}

/// The operator's per-conversation switches (`cairn serve`'s `policy_set`) persist in the
/// conversation's state and sit over the policy: automatic maintenance off leaves the context
/// alone while agent requests still run; automatic handover off turns the trigger's handovers
/// into compactions, and on lets a trigger configured without it hand over.
#[tokio::test]
async fn the_overlay_switches_maintenance_and_automatic_handover_per_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let full = window_for(&t, 0.95);

    cairn::lifecycle::set_overlay(&home, &key(), Some(false), None).unwrap();
    let outcome = life.boundary(report(10, full, Usage::Counted, &t)).await.unwrap();
    assert!(matches!(&outcome.action, Action::Deferred(why) if why.contains("switched off")), "{outcome:?}");
    assert_eq!(size(&outcome.transcript), size(&t), "nothing swapped");
    life.request(key(), AgentRequest { kind: RequestKind::Compact, preserve: String::new(), resume: String::new() }).await.unwrap();
    let outcome = life.boundary(report(11, full, Usage::Counted, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "an agent request still runs: {outcome:?}");

    // The default trigger hands over at 90% only with `auto_handover`, which the policy leaves off.
    let (overlay, _) = cairn::lifecycle::set_overlay(&home, &ConversationKey::parse("other").unwrap(), Some(true), Some(true)).unwrap();
    assert_eq!(overlay.auto_handover, Some(true));
    let other = |turn| BoundaryReport { conversation: ConversationKey::parse("other").unwrap(), ..report(turn, full, Usage::Counted, &t) };
    let outcome = life.boundary(other(10)).await.unwrap();
    assert_eq!(outcome.action, Action::HandedOver, "{outcome:?}");
    // Off again: the same context compacts instead (after the cooldown).
    cairn::lifecycle::set_overlay(&home, &ConversationKey::parse("other").unwrap(), None, Some(false)).unwrap();
    let outcome = life.boundary(other(20)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "{outcome:?}");
    // The first conversation's switch is untouched by the second's.
    let (overlay, _) = cairn::lifecycle::set_overlay(&home, &key(), None, None).unwrap();
    assert_eq!((overlay.maintenance, overlay.auto_handover), (Some(false), None));
}

/// The thrash guard: a compaction whose floor (what it left plus the harness's re-injection
/// budget) leaves too little of the window free would trigger again within turns, so the next
/// automatic maintenance hands over instead, with a notice that says why — where the policy
/// allows automatic handovers; where it does not, the notice alone.
#[tokio::test]
async fn a_floor_with_too_little_headroom_makes_the_next_maintenance_a_handover() {
    for (auto_handover, next) in [(true, Action::HandedOver), (false, Action::Compacted)] {
        let dir = tempfile::tempdir().unwrap();
        let t = sample::coding_session(10);
        let window = window_for(&t, 0.80);
        let policy = default_policy().replace("cooldown_turns = 5", "cooldown_turns = 1").replace("auto_handover = false", &format!("auto_handover = {auto_handover}"))
            + &format!("reinject_budget_tokens = {}\n", window * 3 / 4);
        let life = lifecycle(dir.path(), &policy);
        let compacted = life.boundary(report(1, window, Usage::Counted, &t)).await.unwrap();
        assert_eq!(compacted.action, Action::Compacted);
        let notices = life.take_notices(key()).await.unwrap();
        let low = notices.iter().find(|n| n.kind == "low-headroom").expect("a low-headroom notice");
        assert!(low.text.contains("re-injection budget") && low.text.contains("hands over"), "{}", low.text);
        assert_eq!(life.boundary(report(2, window, Usage::Counted, &t)).await.unwrap().action, next, "auto_handover = {auto_handover}");
        let state: ConversationState = Home::open(dir.path()).unwrap().existing_conversation(&key()).unwrap().load_state().unwrap().unwrap();
        assert_eq!(state.handover_next.is_none(), auto_handover, "a handover resets the floor; a compaction does not");
    }
}

/// What the harness really added back is measured at the next boundary.
#[tokio::test]
async fn a_harness_that_re_injects_too_much_is_measured_at_the_next_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.95);
    let policy = default_policy().replace("cooldown_turns = 5", "cooldown_turns = 1").replace("handover_at = 0.90", "handover_at = 0.99").replace("auto_handover = false", "auto_handover = true")
        + "reinject_budget_tokens = 0\n";
    let life = lifecycle(dir.path(), &policy);
    let compacted = life.boundary(report(1, window, Usage::Counted, &t)).await.unwrap();
    assert_eq!(compacted.action, Action::Compacted);
    assert!(life.take_notices(key()).await.unwrap().iter().all(|n| n.kind != "low-headroom"), "no budget: nothing predicted");
    // A bill from before the compaction is not a measurement.
    let stale = Usage::Reported { tokens: window * 96 / 100, entries_after: 0 };
    assert_eq!(life.boundary(report(2, window, stale, &compacted.transcript)).await.unwrap().action, Action::Compacted);
    assert!(life.take_notices(key()).await.unwrap().iter().all(|n| n.kind != "low-headroom"), "a stale bill is not a floor");
    // After that compaction, the harness put the context back with most of the window re-read
    // around it (88 %: the trigger compacts).
    let compacted = life.boundary(report(3, window, Usage::Counted, &t)).await.unwrap();
    assert_eq!(compacted.action, Action::Compacted);
    let refilled = Usage::Reported { tokens: window * 88 / 100, entries_after: 0 };
    let outcome = life.boundary(report(4, window, refilled, &compacted.transcript)).await.unwrap();
    assert_eq!(outcome.action, Action::HandedOver, "{outcome:#?}");
    let notices = life.take_notices(key()).await.unwrap();
    let low = notices.iter().find(|n| n.kind == "low-headroom").expect("a low-headroom notice");
    assert!(low.text.contains("right after the compaction"), "{}", low.text);
}

/// An undo is the operator taking a compaction back: the next boundary starts the cooldown
/// again, so the history just restored is not compacted away at once; after the cooldown the
/// trigger decides as before.
#[tokio::test]
async fn an_undo_holds_automatic_maintenance_for_the_cooldown() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.50);
    let full = Usage::Reported { tokens: (window as f64 * 0.80) as u64, entries_after: 0 };
    let outcome = life.boundary(report(10, window, full, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "{outcome:?}");
    // After the cooldown (5 turns) the operator undoes it.
    let undone = {
        let mut store = Home::open(dir.path()).unwrap().conversation(&key()).unwrap();
        cairn::undo::undo(&mut store, &life.cairn().tokenizer(), Some(&outcome.transcript), None).unwrap()
    };
    assert_eq!(size(&undone.transcript), size(&t), "the context before the compaction");
    for turn in [16, 20] {
        let outcome = life.boundary(report(turn, window, full, &undone.transcript)).await.unwrap();
        // Without the undo, turn 16 would compact: the compaction's own cooldown ended at 15.
        assert!(!matches!(outcome.action, Action::Compacted | Action::HandedOver), "turn {turn}: {:?}", outcome.action);
    }
    let outcome = life.boundary(report(21, window, full, &undone.transcript)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "the cooldown over, the trigger decides again: {outcome:?}");
}

/// A boundary's dry run: what the lifecycle would do, with nothing written — not the
/// compaction, not the state, not a notice, not even the conversation's creation.
#[tokio::test]
async fn a_dry_run_boundary_reports_what_it_would_do_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path(), &default_policy());
    let t = sample::coding_session(10);
    let window = window_for(&t, 0.50);
    let full = Usage::Reported { tokens: (window as f64 * 0.80) as u64, entries_after: 0 };
    let home = Home::open(dir.path()).unwrap();
    let outcome = life.dry_run(report(10, window, full, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "{outcome:?}");
    let run = outcome.report.unwrap();
    assert!(run.dry_run && run.committed && run.tokens_after < run.tokens_before);
    assert!(home.conversations().unwrap().is_empty(), "the conversation was not even created");
    // On a conversation with a record: its log and state stay as they were.
    life.boundary(report(10, window, Usage::Reported { tokens: (window as f64 * 0.10) as u64, entries_after: 0 }, &t)).await.unwrap();
    let events = home.existing_conversation(&key()).unwrap().events().len();
    let state: Option<ConversationState> = home.state(&key()).unwrap();
    let outcome = life.dry_run(report(11, window, full, &t)).await.unwrap();
    assert_eq!(outcome.action, Action::Compacted, "{outcome:?}");
    assert_eq!(home.existing_conversation(&key()).unwrap().events().len(), events);
    assert_eq!(home.state::<ConversationState>(&key()).unwrap(), state);
}
