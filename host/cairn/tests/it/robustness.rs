//! Property tests over every parser that takes untrusted input: transcript readers (each
//! format), the policy parser, the id and URI parsers, the recall tool's JSON and the
//! tokenizer. Inputs are valid samples mutated at random (a fixed seed, so a failure
//! reproduces); the property is that each answers — a value or an error — and never panics.
//! They run in CI on every change; coverage-guided fuzzing of the same entry points is a
//! separate, longer exercise (see docs/src/testing.md).

use cairn::policy::{Policy, DEFAULT_POLICY};
use cairn::storage::{ArchiveId, ArtifactUri, ConversationKey, Home};
use cairn::transcript::{formats, sample};

use crate::support::Rng;

/// Pieces that tend to reach deep into parsers when spliced in.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    ":",
    "\\",
    "\\u0000",
    "null",
    "true",
    "-1",
    "1e999",
    "18446744073709551616",
    "\"role\"",
    "\"content\"",
    "\"tool_calls\"",
    "\"type\"",
    "\"message\"",
    "\"kind\"",
    "\"parts\"",
    "\"id\"",
    "\n",
    "\r\n",
    "\u{feff}",
    "é",
    "\u{10ffff}",
    "[[chain]]",
    "plugin = ",
    "grants = [",
    "= \"",
    "artifact://",
    "a-",
    "/..",
    "%2e",
];

fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut bytes = seed.as_bytes().to_vec();
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(5) {
            0 => bytes.truncate(at),
            1 if at < bytes.len() => bytes[at] = rng.next() as u8,
            2 => bytes.splice(at..at, TOKENS[rng.below(TOKENS.len())].bytes()).for_each(drop),
            3 if !bytes.is_empty() => {
                let end = (at + rng.below(64)).min(bytes.len());
                let copy = bytes[at.min(end)..end].to_vec();
                bytes.splice(at..at, copy).for_each(drop);
            }
            _ => {
                let end = (at + rng.below(32)).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

const ROUNDS: usize = 20_000;

#[test]
fn transcript_readers_answer_every_mutated_input() {
    let t = sample::coding_session(3);
    let seeds = [
        formats::write_cairn(&t),
        formats::write_openai(&t),
        // A small Pi session: header, a user message, a tool call and its result.
        concat!(
            r#"{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}"#, "\n",
            r#"{"type":"message","id":"1","parentId":null,"timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":[{"type":"text","text":"fix it"}]}}"#, "\n",
            r#"{"type":"message","id":"2","parentId":"1","timestamp":"2025-01-01T00:00:02Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}]}}"#, "\n",
            r#"{"type":"message","id":"3","parentId":"2","timestamp":"2025-01-01T00:00:03Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"a.rs"}],"isError":false}}"#, "\n",
        )
        .to_string(),
        // Real recordings of the agents Cairn reads (generated against a mock model).
        include_str!("../../src/transcript/formats/testdata/codex/remote-compaction-mcp-0.169.0.jsonl").to_string(),
        include_str!("../../src/transcript/formats/testdata/gemini/session-2026-12-01T16-54-c340972c.jsonl").to_string(),
        include_str!("../../src/transcript/formats/testdata/opencode/cairn-compaction-1.18.33.json").to_string(),
    ];
    let mut rng = Rng(0x5eed_0001);
    let mut parsed = 0;
    for round in 0..ROUNDS {
        let input = mutate(&mut rng, &seeds[round % seeds.len()]);
        if formats::parse(&input, "mutated").is_ok() {
            parsed += 1;
        }
    }
    assert!(parsed > 0 && parsed < ROUNDS, "the mutations reach both outcomes ({parsed} of {ROUNDS} parsed)");
}

#[test]
fn the_policy_parser_answers_every_mutated_input() {
    let mut rng = Rng(0x5eed_0002);
    for _ in 0..ROUNDS {
        let _ = Policy::parse(&mutate(&mut rng, DEFAULT_POLICY), "mutated.toml");
    }
}

#[test]
fn id_and_uri_parsers_answer_every_mutated_input() {
    let mut rng = Rng(0x5eed_0003);
    for seed in ["conversation-1", "a-0123456789abcdef", "artifact://a-0123456789abcdef/12"] {
        for _ in 0..ROUNDS {
            let input = mutate(&mut rng, seed);
            let _ = ConversationKey::parse(&input);
            let _ = input.parse::<ArchiveId>();
            if let Ok(uri) = input.parse::<ArtifactUri>() {
                // Whatever parses names nothing outside its archive.
                assert!(!uri.archive_id.contains('/') && !uri.archive_id.contains(".."), "{input:?}");
            }
        }
    }
}

#[test]
fn the_recall_tool_answers_every_mutated_call() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let key = ConversationKey::parse("recall").unwrap();
    drop(home.conversation(&key).unwrap());
    let seeds = [
        r#"{"action":"search","query":"ledger","offset":0,"limit":5}"#,
        r#"{"action":"page","archive_id":"a-0123456789abcdef","offset":0,"limit":5,"char_offset":0}"#,
        r#"{"action":"summary"}"#,
        r#"{"action":"artifact","uri":"artifact://a-0123456789abcdef/1","char_offset":0}"#,
    ];
    let mut rng = Rng(0x5eed_0004);
    for round in 0..ROUNDS {
        let answer = cairn::recall::execute_json(&home, &key, &mutate(&mut rng, seeds[round % seeds.len()]));
        assert!(answer.is_object(), "{answer}");
    }
}

#[test]
fn token_counting_answers_every_mutated_text() {
    let counter = cairn::tokenizer::Tokenizer::default();
    let seed = formats::write_openai(&sample::coding_session(2));
    let mut rng = Rng(0x5eed_0005);
    for _ in 0..300 {
        let text = mutate(&mut rng, &seed).repeat(1 + rng.below(4));
        assert!(counter.count(&text) as usize <= text.len());
    }
}

/// Agents add line kinds between releases. Every recorded Claude Code and Pi session, with 20
/// lines of kinds no reader knows spliced in at random (half carry a message), still reads,
/// counts each of them, keeps the text of those with a message, and compacts.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn recorded_sessions_with_twenty_unknown_line_kinds_compact_and_report_them() {
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts");
    let cairn = crate::support::host();
    let policy = cairn.default_policy().unwrap();
    let mut rng = Rng(0x5eed_cafe);
    let mut sessions = 0;
    for dir in ["claude-code", "pi"] {
        for file in std::fs::read_dir(shared.join(dir)).unwrap().map(|f| f.unwrap().path()) {
            let name = file.display().to_string();
            let text = std::fs::read_to_string(&file).unwrap();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let mut notes = Vec::new();
            // After the header and, in Pi's v1 files, the last compaction (its kept index counts
            // lines), and before the last line (the leaf of Pi's tree).
            let from = 1 + lines.iter().rposition(|l| dir == "pi" && l.contains(r#""type":"compaction""#)).unwrap_or(0);
            for n in 0..20 {
                let at = from + rng.below(lines.len() - from);
                let line = if n % 2 == 0 {
                    let note = format!("note {n} from a newer release {:x}", rng.next());
                    notes.push(note.clone());
                    serde_json::json!({"type": format!("future-kind-{n}"), "sessionId": "s", "message": {"role": "user", "content": [{"type": "text", "text": note}]}})
                } else {
                    serde_json::json!({"type": format!("future-kind-{n}"), "sessionId": "s", "state": {"n": n}})
                };
                lines.insert(at, line.to_string());
            }
            let (t, _) = formats::parse(&lines.join("\n"), &name).unwrap_or_else(|e| panic!("{e}"));
            let u = &t.unrecognized;
            assert_eq!(u.skipped.values().sum::<u32>() + u.kept.values().sum::<u32>(), 20, "{name}: {u}");
            assert_eq!(u.kept.len(), 10, "{name}: {u}");
            // Notes before Claude Code's last compaction are not in its context; the rest are.
            let texts: String = t.entries.iter().map(|e| e.model_text()).collect();
            let visible = notes.iter().filter(|n| texts.contains(n.as_str())).count();
            assert!(visible > 0 || text.contains("compact_boundary"), "{name}: no note kept");
            let (original, _) = formats::parse(&text, &name).unwrap();
            assert_eq!(cairn::chain::pairing_problems(&t.entries), cairn::chain::pairing_problems(&original.entries), "{name}");
            let home_dir = tempfile::tempdir().unwrap();
            let home = Home::open(home_dir.path()).unwrap();
            let mut store = home.conversation(&ConversationKey::derive(&name)).unwrap();
            let report = cairn.compact(&policy, &mut store, &t, &name).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert!(report.tokens_after <= report.tokens_before, "{name}");
            sessions += 1;
        }
    }
    assert!(sessions >= 5, "only {sessions} recorded sessions");
}
