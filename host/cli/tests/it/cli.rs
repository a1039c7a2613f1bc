//! The real `cairn` binary on real transcripts (from `../shared/transcripts`, recorded by
//! others) and on generated ones, with real Wasm components.

use crate::support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

use cairn::transcript::{formats, Part};
use serde_json::Value;
use support::{misbehave_plugin_dir, shared};

fn cairn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", "error").output().expect("running cairn")
}

fn ok(args: &[&str]) -> String {
    let out = cairn(args);
    assert!(out.status.success(), "cairn {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = cairn(args);
    assert!(!out.status.success(), "cairn {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The tokenizer's tables (~35 MB of heap) are built at the first count: a command that never
/// counts never builds them, and one that counts does (both said by its debug log).
#[test]
fn only_commands_that_count_build_the_tokenizer_tables() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&cairn::transcript::sample::coding_session(4))).unwrap();
    let builds_tables = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", "cairn::tokenizer=debug").output().unwrap();
        assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).contains("tokenizer tables built")
    };
    assert!(!builds_tables(&["plugins", "list"]), "`plugins list` counts nothing");
    assert!(builds_tables(&["compact", s(&session), "--home", s(&dir.path().join("home")), "--dry-run"]), "`compact` counts");
}

/// Compacts `file` to OpenAI JSON and checks what a harness relies on: shake-elide ran first,
/// the context shrank, every tool call is immediately followed by its result, and every
/// artifact is the exact original tool output.
fn compact_and_verify(file: &Path, max_ratio: f64) {
    let dir = tempfile::tempdir().unwrap();
    let (home, out) = (dir.path().join("home"), dir.path().join("out.json"));
    let report: Value = serde_json::from_str(&ok(&["compact", s(file), "--json", "--home", s(&home), "--out", s(&out), "--out-format", "openai"])).unwrap();
    let steps = report["steps"].as_array().unwrap();
    assert!(steps[0]["plugin"].as_str().unwrap().starts_with("shake-elide@"), "{report:#}");
    assert_eq!(steps[0]["outcome"], "ok", "{report:#}");
    assert!(steps[0]["millis"].is_u64());
    let (before, after) = (report["tokens_before"].as_u64().unwrap(), report["tokens_after"].as_u64().unwrap());
    assert!((after as f64) < before as f64 * max_ratio, "{before} -> {after}");
    assert!(report["replaced"].as_u64().unwrap() > 0);
    let artifacts = report["artifacts"].as_array().unwrap();
    assert!(!artifacts.is_empty());

    let messages: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for (i, message) in messages.iter().enumerate() {
        let Some(calls) = message["tool_calls"].as_array() else { continue };
        for (k, call) in calls.iter().enumerate() {
            let next = &messages[i + 1 + k];
            assert_eq!(next["role"], "tool", "message {i}: call {k} is not followed by its result");
            assert_eq!(next["tool_call_id"], call["id"], "message {i}: results out of order");
        }
    }

    let text = std::fs::read_to_string(file).unwrap();
    let (original, _) = formats::parse(&text, s(file)).unwrap();
    let originals: HashMap<String, String> = original
        .entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult { call_id, content, .. } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    // A placeholder left in the context recovers its own call's output.
    for message in messages.iter().filter(|m| m["role"] == "tool") {
        let content = message["content"].as_str().unwrap();
        let Some(uri) = content.split("recover: ").nth(1) else { continue };
        let uri = uri.trim_end_matches(']');
        assert!(artifacts.iter().any(|a| a == uri), "{uri} is not among the reported artifacts");
        let stored = ok(&["artifact", uri, "--home", s(&home)]);
        assert_eq!(stored, originals[message["tool_call_id"].as_str().unwrap()], "{uri}");
    }
    // Everything set aside — also what the summarizing stage then replaced — is in the archive
    // byte for byte.
    for uri in artifacts {
        let stored = ok(&["artifact", uri.as_str().unwrap(), "--home", s(&home)]);
        assert!(original.entries.iter().any(|e| e.model_text().contains(&stored)), "{uri} is not original content");
    }
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn compacts_the_large_pi_session() {
    let pi = shared("pi");
    // Edit and write calls hold ~45k tokens of file contents that elision leaves (34 % freed);
    // the default's summarizing stage takes the rest under the target (half).
    compact_and_verify(&pi.join("pi-mono__large-session.jsonl"), 0.5);
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn history_finds_an_elided_line_of_a_real_session_and_reads_it_back_exactly() {
    let pi = shared("pi");
    let file = pi.join("pi-mono__large-session.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let report: Value = serde_json::from_str(&ok(&["compact", s(&file), "--json", "--home", s(&home), "--conversation", "pi-large"])).unwrap();

    // A line of an elided output that occurs nowhere else in the session.
    let (original, _) = formats::parse(&std::fs::read_to_string(&file).unwrap(), "pi").unwrap();
    let everything: String = original.entries.iter().map(|e| e.model_text()).collect();
    let (uri, content, needle) = report["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|uri| {
            let uri = uri.as_str().unwrap();
            let content = ok(&["artifact", uri, "--home", s(&home), "--conversation", "pi-large"]);
            let needle = content.lines().map(str::trim).find(|l| l.len() > 30 && l.len() < 90 && l.split_whitespace().count() > 3 && everything.matches(l).count() == 1)?.to_string();
            Some((uri.to_string(), content, needle))
        })
        .expect("an elided output with a unique line");

    // Then hand the session over as well: both archives hold the needle's output, and the
    // search finds it once, in the newest archive (never the same hit twice).
    let handover: Value = serde_json::from_str(&ok(&["handover", s(&file), "--json", "--home", s(&home), "--conversation", "pi-large"])).unwrap();
    let found: Value = serde_json::from_str(&ok(&["history", "--home", s(&home), "--conversation", "pi-large", "search", &needle, "--json"])).unwrap();
    let hits: Vec<(&Value, &Value)> = found["hits"].as_array().unwrap().iter().map(|h| (&h["archive_id"], &h["entry_id"])).collect();
    assert!(hits.iter().any(|(a, _)| *a == &handover["archive_id"]), "{found:#}");
    let entries: std::collections::HashSet<String> = hits.iter().map(|(_, e)| e.to_string()).collect();
    assert_eq!(entries.len(), hits.len(), "no entry found twice: {found:#}");
    let hit = &found["hits"][0];
    let mut text = String::new();
    let mut char_offset = 0u64;
    loop {
        let page: Value = serde_json::from_str(&ok(&[
            "history",
            "--home",
            s(&home),
            "--conversation",
            "pi-large",
            "page",
            hit["archive_id"].as_str().unwrap(),
            "--offset",
            &hit["index"].to_string(),
            "--limit",
            "1",
            "--char-offset",
            &char_offset.to_string(),
            "--json",
        ]))
        .unwrap();
        text.push_str(page["entries"][0]["text"].as_str().unwrap());
        match page["entries"][0]["next_char_offset"].as_u64() {
            Some(next) => char_offset = next,
            None => break,
        }
    }
    assert!(text.contains(&needle), "paging reads the needle back");
    assert!(text.contains(&content), "paging reads the whole elided output back exactly ({uri})");

    // Another conversation cannot see it, and bad keys are refused.
    ok(&["compact", s(&file), "--home", s(&home), "--conversation", "other"]);
    let other: Value = serde_json::from_str(&ok(&["history", "--home", s(&home), "--conversation", "other", "search", &needle, "--json"])).unwrap();
    assert!(other["hits"].as_array().unwrap().iter().all(|h| h["archive_id"] != report["archive_id"]));
    assert!(fails(&["artifact", &uri, "--home", s(&home), "--conversation", "other"]).contains("not found"));
    assert!(fails(&["history", "--home", s(&home), "--conversation", "../pi-large", "summary"]).contains("invalid conversation key"));
}

/// A person's first searches: a mistyped conversation is an error that lists what is there, and
/// a search without a hit says so (it printed nothing and exited 0).
#[test]
fn history_names_a_missing_conversation_and_a_search_without_a_hit() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let file = dir.path().join("session.jsonl");
    std::fs::write(&file, formats::write_cairn(&cairn::transcript::sample::coding_session(12))).unwrap();
    ok(&["compact", s(&file), "--home", s(&home), "--conversation", "app"]);

    let error = fails(&["history", "--home", s(&home), "--conversation", "ap", "search", "apply"]);
    assert!(error.contains("no conversation ap in home") && error.contains("conversations here: app"), "{error}");
    let summary = ok(&["history", "--home", s(&home), "--conversation", "ap", "summary"]);
    assert!(summary.contains("(no conversation ap in home") && summary.contains("conversations here: app"), "{summary}");

    let none = ok(&["history", "--home", s(&home), "--conversation", "app", "search", "zzqqxxyy"]);
    assert!(none.contains("no archived entry of conversation app matches \"zzqqxxyy\""), "{none}");
    let as_json: Value = serde_json::from_str(&ok(&["history", "--home", s(&home), "--conversation", "app", "search", "zzqqxxyy", "--json"])).unwrap();
    assert_eq!(as_json["hits"], serde_json::json!([]), "scripts still get the answer as it is");
}

/// `compact` without `--out` says where the compacted context is and the command that prints
/// it; that command (`cairn context`) prints the context `--out` would have written, in any
/// writable format; an unknown conversation is an error that lists those the home holds.
#[test]
fn context_prints_what_compact_left_and_compact_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let file = dir.path().join("session.jsonl");
    let written = dir.path().join("compacted.json");
    std::fs::write(&file, formats::write_cairn(&cairn::transcript::sample::coding_session(12))).unwrap();
    let said = ok(&["compact", s(&file), "--home", s(&home), "--conversation", "app"]);
    let hint = format!("cairn context --conversation app --home {} --out FILE", s(&home));
    assert!(said.contains(&hint), "{said}");

    // What a second compaction with --out writes is what `context` prints afterwards.
    ok(&["compact", s(&file), "--home", s(&home), "--conversation", "other", "--out", s(&written), "--out-format", "openai"]);
    let printed = ok(&["context", "--home", s(&home), "--conversation", "other", "--out-format", "openai"]);
    assert_eq!(printed, std::fs::read_to_string(&written).unwrap(), "context prints the compacted context");
    let (context, format) = formats::parse(&printed, "context").unwrap();
    assert_eq!(format.name(), "openai");
    assert!(printed.contains("artifact://"), "the compacted context names what was set aside");
    let as_json: Value = serde_json::from_str(&ok(&["context", "--home", s(&home), "--conversation", "other", "--json"])).unwrap();
    assert_eq!(as_json["entries"].as_u64(), Some(context.entries.len() as u64), "{as_json:#}");
    assert!(as_json["tokens"].as_u64().unwrap() > 0 && as_json["transcript"].as_str().unwrap().starts_with("{\"cairn\""), "{as_json:#}");

    // Every verb that reads or writes one conversation says a missing one once, with the list.
    for verb in [
        vec!["context", "--home", s(&home), "--conversation", "ap"],
        vec!["show", "--home", s(&home), "--conversation", "ap"],
        vec!["undo", "--home", s(&home), "--conversation", "ap"],
        vec!["pin", "--home", s(&home), "--conversation", "ap", "e1"],
        vec!["artifact", "artifact://a-0123456789abcdef/1", "--home", s(&home), "--conversation", "ap"],
    ] {
        let error = fails(&verb);
        assert!(error.contains("no conversation ap in home") && error.contains("conversations here: app, other"), "{verb:?}: {error}");
        assert!(!error.contains("os error") && error.matches("no conversation").count() == 1, "{verb:?} says it once: {error}");
    }
}

/// A `--plugin-dir` that holds no component (a plugin's source folder, say) is said, not
/// accepted silently.
#[test]
fn a_plugin_dir_without_plugins_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.jsonl");
    std::fs::write(&file, formats::write_cairn(&cairn::transcript::sample::coding_session(8))).unwrap();
    let sources = dir.path().join("plugins");
    std::fs::create_dir_all(sources.join("my-strategy/src")).unwrap();
    std::fs::write(sources.join("my-strategy/src/lib.rs"), "// a plugin's source").unwrap();
    let out = cairn(&["compact", s(&file), "--home", s(&dir.path().join("home")), "--plugin-dir", s(&sources)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("warning: --plugin-dir {}: no plugin here, nothing loaded", s(&sources))), "{stderr}");
}

/// The operator's messages in a parsed transcript, in order.
fn operator_messages(t: &cairn::transcript::Transcript) -> Vec<String> {
    use cairn::transcript::{Origin, Role};
    t.entries
        .iter()
        .filter(|e| e.role == Role::User && e.origin == Origin::Operator)
        .map(|e| e.parts.iter().filter_map(|p| if let Part::Text { text } = p { Some(text.as_str()) } else { None }).collect::<Vec<_>>().join("\n"))
        .collect()
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn the_deterministic_checkpoint_of_a_real_session_keeps_requests_and_files() {
    let pi = shared("pi");
    let file = pi.join("pi-mono__large-session.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("checkpoint.toml");
    std::fs::write(&policy, "[[chain]]\nplugin = \"checkpoint-json\"\ngrants = [\"log\", \"tokens\"]\nmemory_mib = 256\n").unwrap();
    let report: Value = serde_json::from_str(&ok(&["compact", s(&file), "--json", "--home", s(&dir.path().join("home")), "--policy", s(&policy)])).unwrap();
    assert_eq!(report["steps"][0]["outcome"], "ok", "{report:#}");
    // The checkpoint is JSON in the JSON report, not a string holding JSON.
    let checkpoint: Value = report["checkpoint"].clone();
    assert!(checkpoint.is_object(), "{report:#}");
    cairn::checkpoint::validate(&checkpoint.to_string()).unwrap();

    let (original, _) = formats::parse(&std::fs::read_to_string(&file).unwrap(), "pi").unwrap();
    let operator = operator_messages(&original);
    let objective = checkpoint["task_objective"].as_str().unwrap();
    assert!(objective.contains(operator.last().unwrap().as_str()), "the last request, verbatim: {objective}");
    let constraints = checkpoint["negative_constraints"].as_array().unwrap();
    assert!(!constraints.is_empty());
    for constraint in constraints {
        let constraint = constraint.as_str().unwrap();
        assert!(operator.iter().any(|m| m.contains(constraint)), "not verbatim from an operator message: {constraint}");
    }
    let calls: String = original.entries.iter().flat_map(|e| e.parts.iter()).filter_map(|p| if let Part::ToolCall { args, .. } = p { Some(args.as_str()) } else { None }).collect();
    for key in ["files_read", "files_modified"] {
        let files = checkpoint[key].as_array().unwrap();
        assert!(!files.is_empty(), "{key} is empty");
        assert!(files.iter().all(|f| calls.contains(f.as_str().unwrap())), "{key} names a file no tool call touched");
    }
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_handover_seeds_the_last_three_operator_messages_as_history_and_archives_every_text_entry() {
    let pi = shared("pi");
    let file = pi.join("pi-mono__large-session.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let report: Value = serde_json::from_str(&ok(&["handover", s(&file), "--json", "--home", s(&home), "--conversation", "pi-handover"])).unwrap();
    assert_eq!(report["steps"][0]["outcome"], "ok", "{report:#}");
    let archive_id = report["archive_id"].as_str().unwrap();
    let seed = report["seed"].as_str().unwrap();
    assert!(seed.contains(archive_id));
    assert!(seed.contains("not fresh authorization") && seed.contains("git status"), "{seed}");

    let (original, _) = formats::parse(&std::fs::read_to_string(&file).unwrap(), "pi").unwrap();
    let operator = operator_messages(&original);
    let quoted: Vec<&str> = seed.split("[history] ").skip(1).collect();
    assert_eq!(quoted.len(), 3, "exactly three operator messages: {seed}");
    for (quote, message) in quoted.iter().zip(&operator[operator.len() - 3..]) {
        let clipped: String = message.chars().take(2_000).collect();
        assert!(quote.starts_with(clipped.replace("\n#", "\n\\#").as_str()), "quote is not the message: {quote:?}");
        assert!(quote.chars().count() >= clipped.chars().count());
    }

    // The archive holds every text entry of the session, readable by paging.
    let mut archived = Vec::new();
    let mut offset = 0u64;
    loop {
        let page: Value =
            serde_json::from_str(&ok(&["history", "--home", s(&home), "--conversation", "pi-handover", "page", archive_id, "--offset", &offset.to_string(), "--limit", "30", "--json"])).unwrap();
        archived.extend(page["entries"].as_array().unwrap().iter().map(|e| e["entry_id"].as_str().unwrap().to_string()));
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    for entry in original.entries.iter().filter(|e| e.parts.iter().any(|p| matches!(p, Part::Text { .. }))) {
        assert!(archived.contains(&entry.id), "text entry {} is not in the archive", entry.id);
    }
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn compacts_the_openhands_sessions() {
    let dir = shared("openai-chat");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), 3);
    for file in files {
        compact_and_verify(&file, 0.6);
    }
}

#[test]
fn misbehaving_plugins_from_a_plugin_dir_fail_by_class_and_the_chain_completes() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = misbehave_plugin_dir(dir.path());
    let mut policy = String::new();
    for (mode, limit) in [("trap", ""), ("loop", "timeout_ms = 300"), ("oom", "memory_mib = 32")] {
        policy += &format!("[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\n{limit}\nconfig = {{ mode = \"{mode}\" }}\n\n");
    }
    policy += "[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n";
    std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, formats::write_cairn(&cairn::transcript::sample::coding_session(10))).unwrap();

    let report: Value =
        serde_json::from_str(&ok(&["compact", s(&transcript), "--json", "--home", s(&dir.path().join("home")), "--policy", s(&dir.path().join("policy.toml")), "--plugin-dir", s(&plugins)])).unwrap();
    let outcomes: Vec<&str> = report["steps"].as_array().unwrap().iter().map(|s| s["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["trap", "timeout", "oom", "ok"], "{report:#}");
}

#[test]
fn plugins_list_shows_kind_version_and_imports() {
    let list: Value = serde_json::from_str(&ok(&["plugins", "list", "--json"])).unwrap();
    let shake = list.as_array().unwrap().iter().find(|p| p["name"] == "shake-elide").expect("shake-elide is bundled");
    assert_eq!(shake["kind"], "strategy");
    assert_eq!(shake["version"], "0.1.0");
    assert_eq!(shake["imports"], serde_json::json!(["log", "tokens", "archive"]));
    assert_eq!(shake["wasi"], false);
    assert!(!list.as_array().unwrap().iter().any(|p| p["name"] == "misbehave"), "fixtures are not bundled");
}

#[test]
fn the_demo_runs_offline_and_shows_before_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = ok(&["demo", "--turns", "12", "--dir", s(&demo)]);
    assert!(out.contains("shake-elide@0.1.0"), "{out}");
    assert!(out.contains("returns the original, byte for byte"), "{out}");
    // A second demo replaces the first one's folder; a folder it did not make is refused.
    ok(&["demo", "--turns", "12", "--dir", s(&demo)]);
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
    let error = fails(&["demo", "--dir", s(&theirs)]);
    assert!(error.contains("is not a folder `cairn demo` made"), "{error}");
    assert_eq!(std::fs::read_to_string(theirs.join("notes.txt")).unwrap(), "mine", "nothing of theirs is touched");
}

/// `show`'s timeline keeps its columns when a pipeline's compaction names two plugins.
#[test]
fn the_timeline_keeps_its_columns_for_a_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let (file, home) = (dir.path().join("session.jsonl"), dir.path().join("home"));
    let mut by = Vec::new();
    // The second time with more turns (the same original again would be already compacted).
    for (turns, budget) in [(30, "3000"), (36, "20000")] {
        std::fs::write(&file, formats::write_cairn(&cairn::transcript::sample::coding_session(turns))).unwrap();
        let report: Value = serde_json::from_str(&ok(&["compact", s(&file), "--home", s(&home), "--conversation", "t", "--budget", budget, "--json"])).unwrap();
        by.push(report["committed_by"].as_str().unwrap().to_string());
    }
    assert!(by[0].contains(" + ") && !by[1].contains(" + "), "one pipeline commit and one single: {by:?}");
    let shown = ok(&["show", "--home", s(&home), "--conversation", "t"]);
    let arrows: Vec<usize> = shown.lines().filter(|l| l.contains(" compact ")).map(|l| l.chars().position(|c| c == '→').unwrap()).collect();
    assert_eq!(arrows.len(), 2, "{shown}");
    assert_eq!(arrows[0], arrows[1], "the token columns line up:\n{shown}");
}

/// Every command the demo prints as a next step works as printed (they once named a home the
/// demo had already deleted); `ui` serves until stopped and is only checked to be printed.
#[test]
fn the_demo_s_next_commands_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&["demo", "--turns", "12", "--dir", s(&dir.path().join("demo"))]);
    let next: Vec<Vec<String>> = out.lines().filter_map(|l| l.strip_prefix("  cairn ")).map(|l| l.split_whitespace().map(str::to_string).collect()).collect();
    let verbs: Vec<&str> = next.iter().map(|args| args[0].as_str()).collect();
    assert_eq!(verbs, ["show", "show", "artifact", "context", "history", "undo", "ui"], "{out}");
    for args in next.iter().filter(|args| args[0] != "ui") {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let said = ok(&args);
        assert!(!said.trim().is_empty(), "cairn {args:?} printed nothing");
        if args[0] == "history" {
            assert!(!said.contains("no archived entry"), "the printed search finds something: {said}");
        }
    }
    // A script gets the same from --json (a new run replaces the demo's folder).
    let json: Value = serde_json::from_str(&ok(&["demo", "--turns", "12", "--dir", s(&dir.path().join("demo")), "--json"])).unwrap();
    let verbs: Vec<&str> = json["next"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().split_whitespace().nth(1).unwrap()).collect();
    assert_eq!(verbs, ["show", "show", "artifact", "context", "history", "undo", "ui"], "{json:#}");
    assert!(json["tokens_after"].as_u64() < json["tokens_before"].as_u64() && json["artifact"].as_str().is_some_and(|a| a.starts_with("artifact://")), "{json:#}");
}

#[test]
fn the_example_offline_policy_runs() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, formats::write_cairn(&cairn::transcript::sample::coding_session(8))).unwrap();
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies/offline.toml");
    let report: Value = serde_json::from_str(&ok(&["compact", s(&transcript), "--json", "--home", s(&dir.path().join("home")), "--policy", s(&policy)])).unwrap();
    assert_eq!(report["steps"][0]["outcome"], "ok", "{report:#}");
    assert!(report["committed_by"].as_str().unwrap().starts_with("shake-elide@"));
}

#[test]
fn bad_input_gets_a_clear_error_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, "{\"type\":\"session\",\"id\":\"x\"}\n{\"type\":\"message\",\"message\":\n").unwrap();
    let err = fails(&["compact", s(&broken), "--home", s(&home)]);
    assert!(err.contains("broken.jsonl:2"), "{err}");

    // Two entries with one id: refused before anything is recorded, naming the lines.
    let mut twice = cairn::transcript::sample::coding_session(2);
    twice.entries[3].id = twice.entries[2].id.clone();
    let dup = dir.path().join("dup.jsonl");
    std::fs::write(&dup, formats::write_cairn(&twice)).unwrap();
    let err = fails(&["compact", s(&dup), "--home", s(&home)]);
    assert!(err.contains(&format!("dup.jsonl:5: duplicate entry id `{}` (first at line 4)", twice.entries[2].id)), "{err}");
    assert!(!home.join("conversations/dup").exists(), "nothing recorded");

    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, formats::write_cairn(&cairn::transcript::sample::coding_session(2))).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[[chain]]\nplugin = \"shake-elide\"\ntimeout_ms = \"soon\"\n").unwrap();
    let err = fails(&["compact", s(&good), "--home", s(&home), "--policy", s(&policy)]);
    assert!(err.contains("policy.toml:3:14: invalid type"), "{err}");

    std::fs::write(&policy, "[trigger]\nplugin = \"shake-elide\"\n\n[[handover]]\nplugin = \"handover\"\n").unwrap();
    let err = fails(&["compact", s(&good), "--home", s(&home), "--policy", s(&policy)]);
    assert!(err.contains("policy.toml:2:10: plugin `shake-elide` is a strategy plugin, not a trigger"), "{err}");
    std::fs::write(&policy, "[[handover]]\nplugin = \"handvoer\"\n").unwrap();
    let err = fails(&["compact", s(&good), "--home", s(&home), "--policy", s(&policy)]);
    assert!(err.contains("policy.toml:2:10: unknown strategy plugin `handvoer`"), "{err}");
    // A step that does not grant what its plugin needs is refused before anything runs.
    std::fs::write(&policy, "[[handover]]\nplugin = \"handover\"\n").unwrap();
    let err = fails(&["compact", s(&good), "--home", s(&home), "--policy", s(&policy)]);
    assert!(err.contains("policy.toml:2:10: plugin `handover` needs the `log` capability") && err.contains("add \"log\""), "{err}");

    let err = fails(&["compact", s(&good), "--home", s(&home), "--conversation", "../escape"]);
    assert!(err.contains("invalid conversation key"), "{err}");
    assert!(!dir.path().join("escape").exists());

    let err = fails(&["artifact", "artifact://a-0123456789abcdef/../../etc/passwd", "--home", s(&home)]);
    assert!(err.contains("invalid artifact URI"), "{err}");
    // Every compaction above failed, so nothing made the home: a read names that, then on an
    // existing home names the missing artifact.
    let err = fails(&["artifact", "artifact://a-0123456789abcdef/1", "--home", s(&home)]);
    assert!(err.contains("no Cairn home at"), "{err}");
    std::fs::create_dir_all(&home).unwrap();
    let err = fails(&["artifact", "artifact://a-0123456789abcdef/1", "--home", s(&home)]);
    assert!(err.contains("not found"), "{err}");
}

/// A typo in a step's `config` (issue 40): the bundled plugins' manifests carry a config
/// schema, so the policy is refused when it loads — naming the policy's line of the key, the
/// plugin and the keys it knows — and `compact` exits non-zero instead of the step failing at
/// run time and the chain falling through to the last resort.
#[test]
fn a_typo_in_a_step_config_is_refused_when_the_policy_loads() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, formats::write_cairn(&cairn::transcript::sample::coding_session(6))).unwrap();
    let policy = dir.path().join("policy.toml");
    let compact = |text: &str| {
        std::fs::write(&policy, text).unwrap();
        cairn(&["compact", s(&good), "--home", s(&home), "--policy", s(&policy)])
    };

    let out = compact("[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\nconfig = { min_tokens = 200, min_tokns = 5 }\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("policy.toml:4:30: plugin shake-elide@0.1.0: config does not match the plugin's config_schema: unknown key `min_tokns` (known: fence_min_tokens, min_tokens,"), "{err}");
    assert!(!home.join("conversations").exists(), "nothing ran, nothing was recorded");

    // A wrong type, in a config table of a stage, is named at its key too.
    let staged = "[[stage]]\nname = \"one\"\n[[stage.chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n[stage.chain.config]\nprotected_tools = [\"todo\"]\nmin_tokens = \"200\"\n";
    let out = compact(staged);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("policy.toml:8:1: plugin shake-elide@0.1.0: config does not match the plugin's config_schema: `min_tokens`: \"200\" is not of type \"integer\""), "{err}");

    // The trigger's config is checked the same way, and a plugin that takes no config says so.
    let out = compact("[trigger]\nplugin = \"trigger-default\"\ngrants = [\"log\"]\nconfig = { compact_at = 0.8, advise_evry = 3 }\n[commit]\nplugin = \"commit-turn-boundary\"\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("policy.toml:4:30: plugin trigger-default@0.1.0: config does not match the plugin's config_schema: unknown key `advise_evry`"), "{err}");
    let out = compact("[commit]\nplugin = \"commit-turn-boundary\"\nconfig = { strict = true }\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("policy.toml:3:12: plugin commit-turn-boundary@0.1.0: config does not match the plugin's config_schema: unknown key `strict` (it takes no config)"), "{err}");

    // A plugin without a schema complains at run time: its message says where the policy
    // writes the step's config, not a line and column of the JSON the host made of it.
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let shake = cairn_bundle::BUNDLED.iter().find(|p| p.manifest.contains("name = \"shake-elide\"")).unwrap();
    std::fs::write(plain.join("shake-elide.wasm"), shake.component).unwrap();
    std::fs::write(plain.join("shake-elide.toml"), &shake.manifest[..shake.manifest.find("[config_schema]").unwrap()]).unwrap();
    std::fs::write(&policy, "[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\nconfig = { min_tokns = 5 }\n").unwrap();
    let report: Value = serde_json::from_str(&ok(&["compact", s(&good), "--json", "--home", s(&home), "--policy", s(&policy), "--plugin-dir", s(&plain)])).unwrap();
    let message = report["steps"][0]["message"].as_str().unwrap_or_default();
    assert_eq!(report["steps"][0]["outcome"], "invalid", "{report:#}");
    assert!(message.contains("unknown field `min_tokns`") && message.contains("(the step's config at ") && message.contains("policy.toml:4:10;"), "{message}");
    assert!(!message.contains("at line 1 column"), "{message}");

    // What the schema allows still runs.
    let out = compact("[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\nconfig = { min_tokens = 200, protected_tools = [\"todo\"] }\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn numbers_at_their_limits_never_panic_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&cairn::transcript::sample::coding_session(6))).unwrap();
    ok(&["compact", s(&session), "--home", s(&home), "--conversation", "limits"]);
    let max = u64::MAX.to_string();
    ok(&["history", "--home", s(&home), "--conversation", "limits", "search", "ledger", "--offset", &max]);
    let out = cairn(&["history", "--home", s(&home), "--conversation", "limits", "page", "a-0123456789abcdef", "--offset", &max, "--char-offset", &max]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{}", String::from_utf8_lossy(&out.stderr));
    let turn = u32::MAX.to_string();
    let out = ok(&["boundary", s(&session), "--home", s(&home), "--conversation", "limits", "--turn", &turn, "--window", &max, "--reported-tokens", &max, "--json"]);
    assert!(out.contains("\"usage\""), "{out}");
    ok(&["boundary", s(&session), "--home", s(&home), "--conversation", "limits", "--turn", &turn, "--window", "1000", "--reported-tokens", &max]);
}

#[cfg(unix)]
#[test]
fn a_plugin_dir_reads_only_regular_files_of_bounded_size() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::write(plugins.join("zero.toml"), "name = \"zero\"\nkind = \"strategy\"\nversion = \"0.1.0\"\n").unwrap();
    std::os::unix::fs::symlink("/dev/zero", plugins.join("zero.wasm")).unwrap();
    let started = std::time::Instant::now();
    let err = fails(&["plugins", "list", "--plugin-dir", s(&plugins)]);
    assert!(err.contains("zero.wasm is not a regular file"), "{err}");

    std::fs::remove_file(plugins.join("zero.wasm")).unwrap();
    let fifo = plugins.join("zero.wasm");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let err = fails(&["plugins", "list", "--plugin-dir", s(&plugins)]);
    assert!(err.contains("zero.wasm is not a regular file"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "no hang on a FIFO");
}

#[cfg(unix)]
#[test]
fn one_broken_conversation_does_not_hide_the_artifacts_of_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&cairn::transcript::sample::coding_session(10))).unwrap();
    let report: Value = serde_json::from_str(&ok(&["compact", s(&session), "--json", "--home", s(&home), "--conversation", "zz-good"])).unwrap();
    let uri = report["artifacts"][0].as_str().unwrap().to_string();
    // Sorted before the good one: a planted symlink and a conversation with a corrupt log.
    std::os::unix::fs::symlink("/etc", home.join("conversations/aa-planted")).unwrap();
    std::fs::create_dir(home.join("conversations/ab-corrupt")).unwrap();
    std::fs::write(home.join("conversations/ab-corrupt/events.jsonl"), "not json\n").unwrap();
    let stored = ok(&["artifact", &uri, "--home", s(&home)]);
    assert!(!stored.is_empty());
}

#[test]
fn a_compaction_only_the_last_resort_could_commit_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = misbehave_plugin_dir(dir.path());
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[[chain]]\nplugin = \"misbehave\"\ngrants = [\"archive:read\"]\nconfig = { mode = \"trap\" }\n").unwrap();
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&cairn::transcript::sample::coding_session(10))).unwrap();
    let home = dir.path().join("home");
    let args = ["compact", s(&session), "--policy", s(&policy), "--plugin-dir", s(&plugins)];
    let report: Value = serde_json::from_str(&ok(&[&args[..], &["--home", s(&home), "--json"]].concat())).unwrap();
    assert_eq!(report["degraded"], true, "{report:#}");
    // The same file again into the same conversation is already compacted: another home.
    let other = dir.path().join("home-2");
    let out = cairn(&[&args[..], &["--home", s(&other)]].concat());
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: no strategy could compact"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_second_start_loads_every_plugin_from_the_code_cache() {
    let cache = tempfile::tempdir().unwrap();
    let list = || -> Vec<Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_cairn")).args(["plugins", "list", "--json"]).env("CAIRN_CACHE_DIR", cache.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert!(list().iter().all(|p| p["cached"] == false), "the first start compiles");
    let warm = list();
    assert!(!warm.is_empty() && warm.iter().all(|p| p["cached"] == true), "{warm:#?}");
    // A corrupt entry is detected and rebuilt; the plugin still loads.
    let entry = std::fs::read_dir(cache.path()).unwrap().next().unwrap().unwrap().path();
    std::fs::write(&entry, b"not compiled code").unwrap();
    let again = list();
    assert_eq!(again.iter().filter(|p| p["cached"] == false).count(), 1, "{again:#?}");
    assert!(list().iter().all(|p| p["cached"] == true));
}

/// `cairn compact FILE` a second time with the same original: it is recognised as already
/// compacted into its conversation, says where the compacted context is, writes nothing to the
/// home (one compaction in the timeline), exits 0, and `--out` still gets the compacted context.
#[test]
fn compacting_the_same_file_twice_says_it_is_already_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let session = dir.path().join("session.jsonl");
    std::fs::write(&session, formats::write_cairn(&cairn::transcript::sample::coding_session(12))).unwrap();
    let first: Value = serde_json::from_str(&ok(&["compact", s(&session), "--home", s(&home), "--json"])).unwrap();
    let archive = first["archive_id"].as_str().expect("the first compaction commits").to_string();
    let events = std::fs::read(home.join("conversations/session/events.jsonl")).unwrap();

    let again = ok(&["compact", s(&session), "--home", s(&home)]);
    assert!(again.contains("already compacted") && again.contains(&archive), "{again}");
    assert!(again.contains("cairn context --conversation session") && again.contains("cairn show --conversation session"), "{again}");
    assert_eq!(std::fs::read(home.join("conversations/session/events.jsonl")).unwrap(), events, "nothing written to the record");
    let json: Value = serde_json::from_str(&ok(&["compact", s(&session), "--home", s(&home), "--json"])).unwrap();
    assert_eq!((json["already_compacted"].as_bool(), json["already_compacted_by"].as_str()), (Some(true), Some(archive.as_str())), "{json:#}");
    assert!(json["archive_id"].is_null() && json["committed"] == false, "no new archive: {json:#}");

    let out = dir.path().join("out.jsonl");
    ok(&["compact", s(&session), "--home", s(&home), "--out", s(&out)]);
    let context = ok(&["context", "--conversation", "session", "--home", s(&home)]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), context, "--out gets the compacted context");

    let timeline: Value = serde_json::from_str(&ok(&["show", "--conversation", "session", "--home", s(&home), "--json"])).unwrap();
    let compactions = timeline["moments"].as_array().unwrap().iter().filter(|m| m["kind"] == "compaction").count();
    assert_eq!(compactions, 1, "no second compaction of the same original is stacked: {timeline:#}");
    let human = ok(&["show", "--conversation", "session", "--home", s(&home)]);
    assert!(human.contains("entries replaced") && !human.contains("forgotten"), "the timeline says `replaced`: {human}");
}

/// `cairn show K ARCHIVE` of the default policy's two stages (aimed low enough that both run):
/// each stage with what it elided (the placeholder and its artifact), summarized into what and
/// kept verbatim (the tail as such), tokens that add up, and checkpoint-json without a model
/// said as "offline by policy", not as a refusal. `--json` has the same, stage by stage.
#[test]
fn show_tells_a_two_stage_compaction_stage_by_stage() {
    let dir = tempfile::tempdir().unwrap();
    let (file, home, policy) = (dir.path().join("session.jsonl"), dir.path().join("home"), dir.path().join("deep.toml"));
    std::fs::write(&file, formats::write_cairn(&cairn::transcript::sample::coding_session(120))).unwrap();
    let deep = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies/offline-deep.toml")).unwrap();
    std::fs::write(&policy, deep.replace("target_ratio = 0.2", "target_ratio = 0.05")).unwrap();
    let report: Value = serde_json::from_str(&ok(&["compact", s(&file), "--home", s(&home), "--policy", s(&policy), "--json"])).unwrap();
    let archive = report["archive_id"].as_str().unwrap();
    assert!(report["committed_by"].as_str().unwrap().contains(" + "), "both stages commit: {report:#}");

    let human = ok(&["show", "--conversation", "session", archive, "--home", s(&home)]);
    for said in [
        "stage offload: committed by shake-elide",
        "stage summarize: committed by checkpoint-json",
        "  elided: ",
        "  summarized: ",
        "  into: ",
        "  kept verbatim (tail): ",
        "      now ",
        "offline by policy",
    ] {
        assert!(human.contains(said), "`{said}` missing:\n{human}");
    }
    assert!(!human.contains("refused: model"), "an ungranted optional capability is no refusal:\n{human}");

    let view: Value = serde_json::from_str(&ok(&["show", "--conversation", "session", archive, "--home", s(&home), "--json"])).unwrap();
    let t = |v: &Value| v["tokens"].as_u64().unwrap();
    for stage in view["stages"].as_array().unwrap() {
        let kept = t(&stage["kept"]) + t(&stage["tail"]);
        assert_eq!(kept + t(&stage["elided"]) + t(&stage["summarized"]) + t(&stage["dropped"]), stage["tokens_before"].as_u64().unwrap(), "{stage:#}");
        let elided_after = stage["elided"]["tokens_after"].as_u64().unwrap_or(0);
        assert_eq!(kept + elided_after + t(&stage["summaries"]), stage["tokens_after"].as_u64().unwrap(), "{stage:#}");
    }
    assert!(t(&view["stages"][0]["elided"]) > 0 && t(&view["stages"][1]["tail"]) > 0, "elided and verbatim parts are not zero");
    let dry = ok(&["compact", s(&file), "--home", s(&dir.path().join("other")), "--policy", s(&policy), "--dry-run"]);
    assert!(dry.contains("offline by policy") && dry.contains("would replace"), "{dry}");
}

/// Each agent's `install` and `uninstall` tell a script, with `--json`, every file they looked
/// at and what they did to it: added, then unchanged on a second install, then removed.
#[test]
fn every_agent_s_install_and_uninstall_report_each_file_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let opencode = dir.path().join("opencode-project");
    std::fs::create_dir_all(&opencode).unwrap();
    let (claude, gemini, codex) = (dir.path().join(".claude/settings.json"), dir.path().join(".gemini/settings.json"), dir.path().join("codex-home"));
    let agents: [(&str, [&str; 2], &Path); 4] = [
        ("claude-code", ["--settings", s(&claude)], &claude),
        ("gemini", ["--settings", s(&gemini)], &gemini),
        ("codex", ["--codex-home", s(&codex)], &codex.join("config.toml")),
        ("opencode", ["--project", s(&opencode)], &opencode.join("opencode.json")),
    ];
    for (agent, where_, file) in agents {
        let run = |verb: &str| -> Value {
            let mut args = vec![agent, verb, "--json"];
            args.extend(where_);
            serde_json::from_str(&ok(&args)).unwrap_or_else(|e| panic!("cairn {args:?}: not JSON ({e})"))
        };
        let changes = |report: &Value| -> Vec<String> { report["files"].as_array().unwrap().iter().map(|f| f["change"].as_str().unwrap().to_string()).collect() };
        let installed = run("install");
        assert_eq!((installed["agent"].as_str(), installed["verb"].as_str()), (Some(agent), Some("install")), "{installed:#}");
        assert!(installed["files"].as_array().unwrap().iter().any(|f| f["path"] == s(file) && f["change"] == "added"), "{agent}: {installed:#}");
        assert!(file.is_file(), "{agent}: {} written", file.display());
        let again = run("install");
        assert!(changes(&again).iter().all(|c| c == "unchanged"), "{agent}: {again:#}");
        let removed = run("uninstall");
        assert!(changes(&removed).contains(&"removed".to_string()), "{agent}: {removed:#}");
    }
}
