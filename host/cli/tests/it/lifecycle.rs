//! The lifecycle through the real binary: the seed policy on a real session (`simulate`), and
//! crashes — SIGKILL at every point of a compaction and a handover — followed by a restart.

use crate::support;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};

use cairn::transcript::{formats, sample};
use serde_json::Value;
use support::shared;

fn cairn(args: &[&str], fault: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(args).env("CAIRN_LOG", "error");
    match fault {
        Some(point) => cmd.env("CAIRN_FAULT", point),
        None => cmd.env_remove("CAIRN_FAULT"),
    };
    cmd.output().expect("running cairn")
}

fn ok(args: &[&str]) -> Value {
    let out = cairn(args, None);
    assert!(out.status.success(), "cairn {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn simulating_a_real_session_follows_the_seed_policy() {
    let pi = shared("pi");
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("plot.svg");
    let window = 128_000u64;
    let sim = ok(&["simulate", pi.join("pi-mono__large-session.jsonl").to_str().unwrap(), "--window", "128000", "--json", "--plot", plot.to_str().unwrap()]);
    assert!(sim["turns"].as_u64().unwrap() > 50);
    let events = sim["events"].as_array().unwrap();
    let of = |kind: &'static str| events.iter().filter(move |e| e["kind"] == kind);
    let first_advice = of("advice").next().expect("advice is given");
    assert!(first_advice["tokens_before"].as_u64().unwrap() as f64 >= 0.60 * window as f64);
    assert!(of("advice").all(|e| e["turn"].as_u64().unwrap() % 5 == 0));
    let compactions: Vec<&Value> = of("compact").collect();
    assert!(!compactions.is_empty(), "{sim:#}");
    for c in &compactions {
        assert!(c["tokens_before"].as_u64().unwrap() as f64 >= 0.75 * window as f64, "compacted below 75%: {c}");
        assert!(c["tokens_after"].as_u64().unwrap() < c["tokens_before"].as_u64().unwrap());
    }
    let maintenance: Vec<u64> = events.iter().filter(|e| e["kind"] == "compact" || e["kind"] == "handover").map(|e| e["turn"].as_u64().unwrap()).collect();
    assert!(maintenance.windows(2).all(|w| w[1] - w[0] >= 5), "two maintenances within the cooldown: {maintenance:?}");
    assert!(sim["max_tokens"].as_u64().unwrap() <= window);
    assert!(sim["series"].as_array().unwrap().iter().all(|p| p["tokens_before"].as_u64().unwrap() <= window));
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("75% compact") && svg.contains("<circle"), "the plot shows thresholds and events");
    assert!(sim["thresholds"].as_array().unwrap().iter().any(|t| t["label"] == "75% compact" && t["tokens"] == 96_000), "{:#}", sim["thresholds"]);
}

#[test]
fn simulate_draws_the_thresholds_of_the_policy_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&sample::coding_session(8))).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, cairn::policy::DEFAULT_POLICY.replace("compact_at = 0.75", "compact_at = 0.5")).unwrap();
    let sim = ok(&["simulate", session.to_str().unwrap(), "--window", "100000", "--json", "--policy", policy.to_str().unwrap()]);
    let labels: Vec<(&str, u64)> = sim["thresholds"].as_array().unwrap().iter().map(|t| (t["label"].as_str().unwrap(), t["tokens"].as_u64().unwrap())).collect();
    assert_eq!(labels, [("90% handover", 90_000), ("60% advise", 60_000), ("50% compact", 50_000)]);
}

/// Every place a crash can cut a maintenance short.
const POINTS: [&str; 5] = ["reserved", "archived", "recorded", "noticed", "saved"];

/// The crashed conversation's record and state, read through the library (any backend).
fn record(home: &str) -> (Vec<Value>, Value) {
    let home = cairn::storage::Home::open(Path::new(home)).unwrap();
    let Ok(store) = home.existing_conversation(&cairn::storage::ConversationKey::parse("crash").unwrap()) else { return (Vec::new(), Value::Null) };
    let events = store.events().iter().map(|e| serde_json::to_value(e).unwrap()).collect();
    (events, store.load_state::<Value>().unwrap().unwrap_or(Value::Null))
}

/// `home`: a directory, or a PostgreSQL URL (where the unit is one transaction: a crash
/// before its commit leaves no event, and the restart counts the attempt as failed).
fn crash_and_restart(kind: &str, point: &str, home: &str) {
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context.jsonl");
    std::fs::write(&context, formats::write_cairn(&sample::coding_session(12))).unwrap();
    let (h, c) = (home, context.to_str().unwrap());
    let common = ["--home", h, "--conversation", "crash"];
    let boundary = |turn: &str| -> Vec<String> {
        let mut args: Vec<String> = ["boundary", c, "--turn", turn, "--window", "60000", "--count", "--json"].iter().map(|s| s.to_string()).collect();
        args.extend(common.iter().map(|s| s.to_string()));
        args
    };

    let mut request = vec!["request", kind, "--preserve", "the ledger constraints"];
    request.extend(common);
    ok(&request);
    let args = boundary("10");
    let crashed = cairn(&args.iter().map(String::as_str).collect::<Vec<_>>(), Some(point));
    assert_eq!(crashed.status.signal(), Some(9), "{kind} at {point}: the process was killed ({:?})", crashed.status);
    let (_, state) = record(home);
    let archive = state["prepared"]["archive_id"].as_str().map(str::to_string);

    // Restart: the next boundary finishes what the crash interrupted, and the cooldown holds.
    // A handover still prepared is finished and its outcome handed to the harness now (it
    // never saw it); nothing else runs.
    let args = boundary("11");
    let after = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    if kind == "handover" && archive.is_some() {
        assert_eq!(after["action"]["kind"], "handed-over", "{point}: {after:#}");
        assert!(after["report"]["seed"].as_str().unwrap().contains(archive.as_deref().unwrap()), "{point}: the seed comes back: {after:#}");
    } else {
        assert!(!matches!(after["action"]["kind"].as_str(), Some("compacted" | "handed-over")), "{kind} at {point}: maintenance within the cooldown: {after:#}");
    }

    let (log, _) = record(home);
    let attempts: Vec<&Value> = log.iter().filter(|e| e["kind"] == "compaction").collect();
    let mut ids: Vec<&str> = attempts.iter().map(|e| e["archive_id"].as_str().unwrap()).collect();
    ids.dedup();
    assert_eq!(ids.len(), attempts.len(), "{kind} at {point}: an attempt was recorded twice");
    assert!(attempts.len() <= 1, "{kind} at {point}: {} attempts", attempts.len());
    let archive = archive.unwrap_or_else(|| attempts[0]["archive_id"].as_str().unwrap().to_string());
    if kind == "handover" {
        let event = attempts.first().unwrap_or_else(|| panic!("handover at {point}: the prepared handover was not resumed"));
        assert_eq!(event["archive_id"], archive.as_str());
        assert_eq!(event["purpose"], "handover");
        assert!(event["committed_by"].is_string(), "{event:#}");
        assert!(event["seed"].as_str().unwrap().contains(&archive));
    }

    // Exactly one notice for the attempt, with the same id every time until acknowledged.
    let mut list = vec!["notices", "--home", h, "--conversation", "crash", "--json"];
    let first = ok(&list);
    let again = ok(&list);
    assert_eq!(first, again, "{kind} at {point}");
    let ours: Vec<&Value> = first.as_array().unwrap().iter().filter(|n| n["id"] == format!("n-{archive}")).collect();
    assert_eq!(ours.len(), 1, "{kind} at {point}: notices {first:#}");
    let id = format!("n-{archive}");
    list.extend(["--ack", &id]);
    let acked = ok(&list);
    assert!(!acked.as_array().unwrap().iter().any(|n| n["id"] == id.as_str()));
}

/// Every crash point on every backend: a local directory, and a scratch PostgreSQL database
/// per run (where `CAIRN_TEST_POSTGRES` names a server; always under CI).
fn crash_everywhere(kind: &str) {
    for point in POINTS {
        let dir = tempfile::tempdir().unwrap();
        crash_and_restart(kind, point, dir.path().join("home").to_str().unwrap());
        if let Some(db) = cairn::storage::testing::ScratchDatabase::create() {
            crash_and_restart(kind, point, &db.url);
        }
    }
}

#[test]
fn a_compaction_killed_at_any_point_loses_nothing_and_duplicates_nothing() {
    crash_everywhere("compact");
}

#[test]
fn a_handover_killed_at_any_point_is_resumed_once() {
    crash_everywhere("handover");
}

/// The trigger sees what the provider billed, as Claude Code and Pi do: the last reply's usage
/// (input, cache writes and reads, output) plus Cairn's count of what came after, not Cairn's
/// count of the transcript alone (which lacks the system prompt and tool definitions).
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn boundary_from_transcript_uses_the_billed_usage() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    for file in std::fs::read_dir(shared("claude-code")).unwrap().map(|e| e.unwrap().path()) {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        if name.contains("agent-") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let last_billed: u64 = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .rfind(|l| l["type"] == "assistant" && l["isSidechain"] != true)
            .map(|l| ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"].iter().map(|k| l["message"]["usage"][k].as_u64().unwrap_or(0)).sum())
            .unwrap();
        let run = |usage: &str| -> u64 {
            let args = ["boundary", file.to_str().unwrap(), "--turn", "1", "--window", "200000", usage, "--home", home.to_str().unwrap(), "--conversation", "billed", "--json"];
            ok(&args)["usage"].as_u64().unwrap()
        };
        let (recorded, counted) = (run("--from-transcript"), run("--count"));
        assert!(recorded >= last_billed, "{name}: {recorded} < the last bill {last_billed}");
        assert!(recorded > counted, "{name}: the bill ({recorded}) includes what the transcript lacks ({counted} counted)");
    }
}

/// `compact --workspace` stamps the files the session read or edited; `boundary --workspace`
/// then names those changed on disk since, and only those.
#[test]
fn a_file_changed_after_compaction_is_reported_stale() {
    let dir = tempfile::tempdir().unwrap();
    let (home, ws, file) = (dir.path().join("home"), dir.path().join("ws"), dir.path().join("session.jsonl"));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    for module in ["accounts", "journal", "ledger", "reports", "currency"] {
        std::fs::write(ws.join(format!("src/{module}.rs")), format!("// {module}\n")).unwrap();
    }
    std::fs::write(&file, formats::write_cairn(&sample::coding_session(12))).unwrap();
    let (h, w, f) = (home.to_str().unwrap(), ws.to_str().unwrap(), file.to_str().unwrap());
    ok(&["compact", f, "--home", h, "--conversation", "ws", "--workspace", w, "--json"]);
    let quiet = ok(&["boundary", f, "--turn", "13", "--window", "1000000", "--count", "--home", h, "--conversation", "ws", "--workspace", w, "--json"]);
    assert!(quiet.get("stale_files").is_none(), "{quiet}");
    std::fs::write(ws.join("src/ledger.rs"), "// rewritten\n").unwrap();
    std::fs::remove_file(ws.join("src/journal.rs")).unwrap();
    let out = ok(&["boundary", f, "--turn", "14", "--window", "1000000", "--count", "--home", h, "--conversation", "ws", "--workspace", w, "--json"]);
    let mut stale: Vec<(String, String)> = out["stale_files"].as_array().unwrap().iter().map(|s| (s["path"].as_str().unwrap().into(), s["change"].as_str().unwrap().into())).collect();
    stale.sort();
    assert_eq!(stale, [("src/journal.rs".to_string(), "deleted".to_string()), ("src/ledger.rs".into(), "changed".into())]);
}

/// A boundary that does nothing says why, with the figures: usage the trigger did not act on,
/// usage unknown, and the cooldown after a compaction (issue 40: `action: none` said nothing).
#[test]
fn a_boundary_that_does_nothing_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    std::fs::write(&file, formats::write_cairn(&sample::coding_session(40))).unwrap();
    let (f, h) = (file.to_str().unwrap(), dir.path().join("home"));
    let h = h.to_str().unwrap();
    let boundary = |turn: &str, window: &str, usage: &[&str]| {
        let mut args = vec!["boundary", f, "--turn", turn, "--window", window, "--home", h, "--conversation", "why", "--json"];
        args.extend_from_slice(usage);
        ok(&args)
    };
    let roomy = boundary("1", "1000000", &["--count"]);
    assert_eq!(roomy["action"]["kind"], "none", "{roomy:#}");
    let why = roomy["why"].as_str().unwrap_or_default();
    assert!(why.starts_with("the trigger saw no need at ") && why.contains(" of 983616 usable tokens"), "{roomy:#}");
    let unknown = boundary("2", "1000000", &[]);
    assert!(unknown["why"].as_str().unwrap_or_default().starts_with("usage unknown"), "{unknown:#}");

    // A tight window compacts; the next boundary is held by the cooldown and says so.
    let compacted = boundary("3", "30000", &["--count", "--reserve", "1000"]);
    assert_eq!(compacted["action"]["kind"], "compacted", "{compacted:#}");
    let held = boundary("4", "30000", &["--count", "--reserve", "1000"]);
    assert_eq!(held["action"]["kind"], "none", "{held:#}");
    assert!(held["why"].as_str().unwrap_or_default().starts_with("cooldown: 4 turns left"), "{held:#}");

    // A person reads the same without --json: what happened, why, and the usage against the window.
    let human = |args: &[&str]| {
        let out = cairn(args, None);
        assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = human(&["boundary", f, "--turn", "4", "--window", "30000", "--count", "--reserve", "1000", "--home", h, "--conversation", "why", "--dry-run"]);
    assert!(text.starts_with("turn 4: nothing to do — cooldown: 4 turns left"), "{text}");
    assert!(text.contains("\n  context: ") && text.contains(" of 29000 usable tokens (window 30000 less reserve 1000)"), "{text}");

    // The compaction queued a notice: listed with the id `--ack` takes; acknowledged, it is gone.
    let notices = human(&["notices", "--home", h, "--conversation", "why"]);
    assert!(notices.contains(" compacted ") && notices.contains("--ack ID"), "{notices}");
    // `DATE TIME KIND ID TEXT`, one line per notice.
    let ids: Vec<&str> = notices.lines().filter(|l| !l.starts_with("acknowledge")).filter_map(|l| l.split_whitespace().nth(3)).collect();
    let mut ack = vec!["notices", "--home", h, "--conversation", "why"];
    ack.extend(ids.iter().flat_map(|id| ["--ack", id]));
    let acked = human(&ack);
    assert!(acked.contains(&format!("acknowledged: {}", ids.join(", "))) && acked.contains("no notices for conversation why"), "{acked}");
    let typo = human(&["notices", "--home", h, "--conversation", "wyh"]);
    assert!(typo.starts_with("no notices: no conversation wyh in home") && typo.contains("conversations here: why"), "{typo}");
}
