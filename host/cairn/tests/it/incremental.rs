//! Incremental boundaries: the harness sends what it appended since the acknowledged context;
//! the record rebuilds the rest. The same decisions as whole transcripts, and a history that
//! is no longer the acknowledged one is refused as `diverged` with nothing recorded.

use crate::support;

use cairn::lifecycle::{Action, BoundaryReport, ConversationState, Diverged, Usage};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{sample, Entry, Origin, Part, Role, Transcript};
use cairn::Lifecycle;

fn lifecycle(home: &std::path::Path) -> Lifecycle {
    let cairn = support::host();
    let policy = support::policy(&cairn, cairn::policy::DEFAULT_POLICY);
    Lifecycle::new(cairn, Home::open(home).unwrap(), policy)
}

fn key(name: &str) -> ConversationKey {
    ConversationKey::parse(name).unwrap()
}

fn report(conversation: &str, turn: u32, window: u64, entries: Vec<Entry>) -> BoundaryReport {
    BoundaryReport { conversation: key(conversation), turn, turn_complete: true, tool_call_outstanding: false, window, reserve: 0, usage: Usage::Counted, transcript: Transcript::new(entries) }
}

/// The session cut into turns: each ends before the next operator message.
fn turns(t: &Transcript) -> Vec<Vec<Entry>> {
    let mut turns: Vec<Vec<Entry>> = Vec::new();
    for entry in &t.entries {
        if turns.is_empty() || (entry.role == Role::User && entry.origin == Origin::Operator) {
            turns.push(Vec::new());
        }
        turns.last_mut().unwrap().push(entry.clone());
    }
    turns
}

fn ids(entries: &[Entry]) -> Vec<String> {
    entries.iter().map(|e| e.id.clone()).collect()
}

fn size(t: &Transcript) -> u64 {
    let mut t = t.clone();
    cairn::tokenizer::Tokenizer::default().count_transcript(&mut t);
    t.total_tokens()
}

fn diverged(result: anyhow::Result<cairn::lifecycle::BoundaryOutcome>) -> String {
    let error = result.expect_err("diverged");
    assert!(error.downcast_ref::<Diverged>().is_some(), "{error:#}");
    let text = format!("{error:#}");
    assert!(text.starts_with("diverged:") && text.contains("send the whole transcript once"), "{text}");
    text
}

/// What a conversation's record and state are: an attempt that diverged changes neither.
fn recorded(home: &std::path::Path, conversation: &str) -> (usize, Option<ConversationState>) {
    let home = Home::open(home).unwrap();
    let events = home.existing_conversation(&key(conversation)).map(|s| s.events().len()).unwrap_or(0);
    (events, home.state::<ConversationState>(&key(conversation)).unwrap())
}

#[tokio::test]
async fn an_incremental_replay_decides_as_a_whole_replay() {
    let (whole_dir, incremental_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (whole, incremental) = (lifecycle(whole_dir.path()), lifecycle(incremental_dir.path()));
    let session = sample::coding_session(40);
    let window = size(&session) / 2;
    let (mut held_whole, mut held_incremental): (Vec<Entry>, Vec<Entry>) = (Vec::new(), Vec::new());
    let mut since: Option<String> = None;
    let (mut actions, mut sent_whole, mut sent_incremental) = (Vec::new(), 0usize, 0usize);
    for (turn, appended) in turns(&session).into_iter().enumerate() {
        let turn = turn as u32 + 1;
        held_whole.extend(appended.iter().cloned());
        sent_whole += held_whole.len();
        let a = whole.boundary(report("replay", turn, window, held_whole.clone())).await.unwrap();
        sent_incremental += appended.len();
        let b = if since.is_none() {
            // The first call may name no `since`: nothing is recorded yet.
            incremental.boundary_since(report("replay", turn, window, appended.clone()), None).await.unwrap()
        } else {
            incremental.boundary_since(report("replay", turn, window, appended.clone()), since.clone()).await.unwrap()
        };
        held_incremental.extend(appended);
        assert_eq!(a.action, b.action, "turn {turn}");
        // Placeholders name their archive, whose id differs between the two homes: a token or so.
        let (x, y) = (a.usage.unwrap() as f64, b.usage.unwrap() as f64);
        assert!((x - y).abs() <= x * 0.01, "turn {turn}: usage {x} whole, {y} incremental");
        assert_eq!(ids(&a.transcript.entries), ids(&b.transcript.entries), "turn {turn}");
        assert_eq!(a.acknowledged, b.acknowledged, "turn {turn}");
        if b.before.is_some() {
            held_incremental = b.transcript.entries.clone();
        }
        if a.before.is_some() {
            held_whole = a.transcript.entries.clone();
        }
        assert_eq!(ids(&held_incremental), ids(&b.transcript.entries), "turn {turn}: the harness holds the outcome");
        since = b.acknowledged.clone();
        assert_eq!(since.as_deref(), held_incremental.last().map(|e| e.id.as_str()));
        actions.push(a.action);
    }
    assert!(actions.iter().filter(|a| matches!(a, Action::Compacted)).count() >= 2, "{actions:?}");
    assert!(sent_incremental * 5 < sent_whole, "entries sent: {sent_incremental} incremental, {sent_whole} whole");
    // Both records end with the same working context.
    let context = |dir: &std::path::Path| ids(&Home::open(dir).unwrap().existing_conversation(&key("replay")).unwrap().context().unwrap());
    assert_eq!(context(whole_dir.path()), context(incremental_dir.path()));
    assert_eq!(context(incremental_dir.path()), ids(&held_incremental));
}

#[tokio::test]
async fn a_history_that_is_not_the_acknowledged_one_diverges_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path());
    let session = sample::coding_session(6);
    let turns = turns(&session);
    let window = 1_000_000;
    let first = life.boundary(report("div", 1, window, turns[0].clone())).await.unwrap();
    let mut since = first.acknowledged.clone().unwrap();
    for (n, turn) in turns[1..3].iter().enumerate() {
        since = life.boundary_since(report("div", n as u32 + 2, window, turn.clone()), Some(since)).await.unwrap().acknowledged.unwrap();
    }
    let before = recorded(dir.path(), "div");

    // A rewind: `since` names an entry that is no longer the last.
    let earlier = turns[1].last().unwrap().id.clone();
    let text = diverged(life.boundary_since(report("div", 4, window, turns[3].clone()), Some(earlier)).await);
    assert!(text.contains("last entry acknowledged"), "{text}");
    assert_eq!(recorded(dir.path(), "div"), before);

    // An earlier entry edited and sent again under its id.
    let mut edited = turns[1][0].clone();
    edited.parts = vec![Part::Text { text: "something else entirely".into() }].into();
    let text = diverged(life.boundary_since(report("div", 4, window, vec![edited]), Some(since.clone())).await);
    assert!(text.contains("sent again"), "{text}");
    assert_eq!(recorded(dir.path(), "div"), before);

    // A conversation the server does not know, with a `since`.
    diverged(life.boundary_since(report("stranger", 1, window, turns[3].clone()), Some(since.clone())).await);
    assert_eq!(recorded(dir.path(), "stranger"), (0, None));
    // Entries with no `since` for a conversation already recorded.
    diverged(life.boundary_since(report("div", 4, window, turns[3].clone()), None).await);
    assert_eq!(recorded(dir.path(), "div"), before);

    // The harness sends its rewound history whole once: the server follows it from there.
    let mut rewound: Vec<Entry> = turns[..2].concat();
    rewound.extend(turns[3].iter().cloned());
    let whole = life.boundary(report("div", 4, window, rewound.clone())).await.unwrap();
    assert_eq!(whole.acknowledged.as_deref(), rewound.last().map(|e| e.id.as_str()));
    let next = life.boundary_since(report("div", 5, window, turns[4].clone()), whole.acknowledged).await.unwrap();
    rewound.extend(turns[4].iter().cloned());
    assert_eq!(ids(&next.transcript.entries), ids(&rewound), "the dropped turn stays out of the rebuilt context");
    assert_eq!(next.acknowledged.as_deref(), rewound.last().map(|e| e.id.as_str()));
}

#[tokio::test]
async fn every_boundary_records_what_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path());
    let session = sample::coding_session(3);
    let turns = turns(&session);
    let first = life.boundary(report("rec", 1, 1_000_000, turns[0].clone())).await.unwrap();
    assert_eq!(first.action, Action::None);
    let second = life.boundary_since(report("rec", 2, 1_000_000, turns[1].clone()), first.acknowledged).await.unwrap();
    let store = Home::open(dir.path()).unwrap().existing_conversation(&key("rec")).unwrap();
    let context = store.context().unwrap();
    assert_eq!(ids(&context), ids(&turns[..2].concat()));
    assert_eq!(second.acknowledged.as_deref(), context.last().map(|e| e.id.as_str()));
    assert!(context.iter().all(|e| e.tokens > 0), "recorded with their counts");
}

/// A boundary that only appends to the record writes only the record: the state file is not
/// replaced (one synced write per boundary instead of three), and every call, incremental or
/// whole, is still told the id to name next.
#[cfg(unix)]
#[tokio::test]
async fn a_boundary_that_only_appends_leaves_the_state_file_alone() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let life = lifecycle(dir.path());
    let turns = turns(&sample::coding_session(6));
    let window = 1_000_000;
    let first = life.boundary(report("quiet", 1, window, turns[0].clone())).await.unwrap();
    let state = dir.path().join("conversations/quiet/state.json");
    let saved = || (std::fs::metadata(&state).unwrap().ino(), std::fs::read(&state).unwrap());
    let before = saved();
    let mut since = first.acknowledged.unwrap();
    for (n, turn) in turns[1..turns.len() - 1].iter().enumerate() {
        let outcome = life.boundary_since(report("quiet", n as u32 + 2, window, turn.clone()), Some(since)).await.unwrap();
        since = outcome.acknowledged.unwrap();
        assert_eq!(since, turn.last().unwrap().id, "told to name the last entry it sent");
    }
    let whole = life.boundary(report("quiet", 90, window, turns.concat())).await.unwrap();
    assert_eq!(whole.acknowledged.as_deref(), turns.last().unwrap().last().map(|e| e.id.as_str()));
    assert_eq!(saved(), before, "the state file was not replaced");
    // A rewind still diverges: the record's tail is what `since` must name.
    let text = diverged(life.boundary_since(report("quiet", 91, window, vec![]), Some(turns[1].last().unwrap().id.clone())).await);
    assert!(text.contains("last entry acknowledged"), "{text}");
}
