//! The model capability against a loopback server speaking each real wire format, and the
//! model chain with the real plugins: a bad reply is `invalid`, a refused connection is
//! `unavailable`, a slow model is `timeout`, and the chain still commits.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::model::{ChatMessage, HttpProvider, ModelError, ModelProvider, ModelRequest, Wire};
use cairn::record::{CompactionReport, Event, OutcomeClass};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::{sample, Origin, Part};
use cairn::{Cairn, Policy};
use support::host;
use support::loopback::{anthropic_reply, openai_reply, refused_url, Loopback, Reply};

const KEY: &str = "sk-test-secret-4242";

fn request() -> ModelRequest {
    ModelRequest { messages: vec![ChatMessage { role: "system".into(), content: "be brief".into() }, ChatMessage { role: "user".into(), content: "hello".into() }], max_tokens: 64 }
}

fn provider(wire: Wire, url: &str, retries: u32, timeout_ms: u64) -> HttpProvider {
    let base = if wire == Wire::Openai { format!("{url}/v1") } else { url.to_string() };
    HttpProvider::new(wire, &base, "test-model", Some(KEY.into()), Duration::from_millis(timeout_ms), retries)
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(20)
}

#[test]
fn openai_wire_format() {
    let server = Loopback::start(|_, _| Reply::ok(openai_reply("hi there")));
    let answer = provider(Wire::Openai, &server.base_url, 0, 5_000).complete(&request(), soon()).unwrap();
    assert_eq!(answer, "hi there");
    let sent = server.requests.lock().unwrap()[0].clone();
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["max_tokens"], 64);
}

#[test]
fn anthropic_wire_format() {
    let server = Loopback::start(|_, _| Reply::ok(anthropic_reply("hello from claude")));
    let answer = provider(Wire::Anthropic, &server.base_url, 0, 5_000).complete(&request(), soon()).unwrap();
    assert_eq!(answer, "hello from claude");
    let sent = server.requests.lock().unwrap()[0].clone();
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert!(sent.header("anthropic-version").is_some());
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["system"], "be brief", "the system prompt travels apart");
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
}

#[test]
fn rate_limits_and_server_errors_are_retried_with_a_bound() {
    let server = Loopback::start(|n, _| if n == 0 { Reply::status(429, r#"{"error":{"message":"slow down"}}"#) } else { Reply::ok(openai_reply("ok")) });
    assert_eq!(provider(Wire::Openai, &server.base_url, 2, 5_000).complete(&request(), soon()).unwrap(), "ok");
    assert_eq!(server.count(), 2);

    let server = Loopback::start(|_, _| Reply::status(529, r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#));
    let err = provider(Wire::Anthropic, &server.base_url, 2, 5_000).complete(&request(), soon()).unwrap_err();
    assert!(matches!(&err, ModelError::Unavailable(m) if m.contains("529") && m.contains("Overloaded")), "{err:?}");
    assert_eq!(server.count(), 3, "one try and two retries");
}

#[test]
fn client_errors_are_not_retried_and_never_echo_the_key() {
    let server = Loopback::start(|_, r| Reply::status(401, format!(r#"{{"error":{{"message":"invalid key {}"}}}}"#, r.header("authorization").unwrap_or(""))));
    let err = provider(Wire::Openai, &server.base_url, 3, 5_000).complete(&request(), soon()).unwrap_err();
    assert!(matches!(&err, ModelError::Failed(m) if m.contains("401")), "{err:?}");
    assert!(!err.to_string().contains(KEY), "{err}");
    assert_eq!(server.count(), 1);
    assert!(!provider(Wire::Openai, &server.base_url, 0, 1).describe().contains(KEY));
}

/// Panics if `message` carries the key in any case, or any 8-character run of it.
fn assert_keyless(message: &str) {
    let message = message.to_lowercase();
    let key = KEY.to_lowercase();
    for window in key.as_bytes().windows(8) {
        let window = std::str::from_utf8(window).unwrap();
        assert!(!message.contains(window), "{window:?} of the key escaped in {message:?}");
    }
}

/// The key as `request` carried it, for an endpoint to echo.
fn key_sent(wire: Wire, request: &support::loopback::Request) -> String {
    match wire {
        Wire::Openai => request.header("authorization").unwrap_or("").trim_start_matches("Bearer ").to_string(),
        Wire::Anthropic => request.header("x-api-key").unwrap_or("").to_string(),
    }
}

#[test]
fn redirects_are_not_followed_and_the_key_stays_with_the_endpoint() {
    for wire in [Wire::Openai, Wire::Anthropic] {
        for status in [301, 302, 303, 307, 308] {
            let elsewhere = Loopback::start(move |_, _| Reply::ok(if wire == Wire::Openai { openai_reply("stolen") } else { anthropic_reply("stolen") }));
            let host_port = elsewhere.base_url.trim_start_matches("http://").to_string();
            let server = Loopback::start(move |_, r| Reply::redirect(status, format!("http://spy:hunter2@{host_port}{}", r.path)));
            let err = provider(wire, &server.base_url, 2, 5_000).complete(&request(), soon()).unwrap_err();
            let ModelError::Failed(message) = &err else { panic!("{wire:?} {status}: {err:?}") };
            assert!(message.contains(&status.to_string()) && message.contains("redirected") && message.contains("does not follow redirects"), "{message}");
            assert!(!message.contains("hunter2") && !message.contains(&elsewhere.base_url[7..]), "the Location stays out: {message}");
            assert_eq!(server.count(), 1, "{wire:?} {status}: a redirect is a failure, not retried");
            assert_eq!(elsewhere.count(), 0, "{wire:?} {status}: the redirect target got a request (and the key)");
            assert_eq!(key_sent(wire, &server.requests.lock().unwrap()[0]), KEY, "the configured endpoint did get the key");
        }
    }
}

#[test]
fn a_redirecting_endpoint_fails_the_model_step_and_says_why() {
    let elsewhere = Loopback::start(|_, _| Reply::ok(openai_reply(SUMMARY)));
    let target = format!("{}/v1/chat/completions", elsewhere.base_url);
    let server = Loopback::start(move |_, _| Reply::redirect(302, target.clone()));
    let (report, _dir) = compact_with(&host(), &model_policy(&server.base_url, 10_000));
    let message = report.steps[0].message.as_deref().unwrap_or_default();
    assert!(message.contains("302") && message.contains("redirected"), "{:#?}", report.steps);
    assert_ne!(report.steps[0].outcome, OutcomeClass::Ok);
    assert_eq!(elsewhere.count(), 0);
    assert!(report.committed_by.is_some(), "the chain still commits");
}

#[test]
fn error_bodies_echoing_the_key_in_any_form_are_redacted() {
    type Echo = fn(&str) -> String;
    let echoes: [(&str, Echo); 4] = [
        ("exact", |k| k.to_string()),
        ("upper-cased", |k| k.to_uppercase()),
        ("first 12 chars", |k| k[..12].to_string()),
        ("middle 8 chars, mixed case", |k| format!("{}{}", k[3..7].to_uppercase(), &k[7..11])),
    ];
    for wire in [Wire::Openai, Wire::Anthropic] {
        for (what, echo) in echoes {
            for status in [400, 401, 500] {
                // In the provider's own `error.message`, and in a body that is not.
                for json in [true, false] {
                    let server = Loopback::start(move |_, r| {
                        let echoed = echo(&key_sent(wire, r));
                        let body = if json {
                            serde_json::json!({ "type": "error", "error": { "type": "authentication_error", "message": format!("invalid x-api-key {echoed} (Bearer {echoed})") } }).to_string()
                        } else {
                            format!("<html>denied for {echoed}</html>")
                        };
                        Reply::status(status, body)
                    });
                    let err = provider(wire, &server.base_url, 0, 5_000).complete(&request(), soon()).unwrap_err();
                    let message = match &err {
                        ModelError::Failed(m) if status < 500 => m,
                        ModelError::Unavailable(m) if status >= 500 => m,
                        _ => panic!("{wire:?} {status}: {err:?}"),
                    };
                    assert!(message.contains(&status.to_string()), "{message}");
                    assert_keyless(message);
                    assert_keyless(&err.to_string());
                    assert_keyless(&format!("{err:?}"));
                    if json {
                        assert!(message.contains("invalid x-api-key"), "the provider's message is kept: {message}");
                    } else {
                        assert!(!message.contains("denied") && !message.contains("<html>"), "{what}: raw bytes of a foreign body: {message}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_completion_echoing_the_key_does_not_hand_it_on() {
    for wire in [Wire::Openai, Wire::Anthropic] {
        let server = Loopback::start(move |_, r| {
            let text = format!("your key is {} or {}", key_sent(wire, r).to_uppercase(), &KEY[..12]);
            Reply::ok(if wire == Wire::Openai { openai_reply(&text) } else { anthropic_reply(&text) })
        });
        let answer = provider(wire, &server.base_url, 0, 5_000).complete(&request(), soon()).unwrap();
        assert!(answer.starts_with("your key is "), "{answer}");
        assert_keyless(&answer);
    }
}

#[test]
fn huge_error_bodies_give_short_messages() {
    const HUGE: usize = 7 << 20;
    for wire in [Wire::Openai, Wire::Anthropic] {
        for json in [true, false] {
            let server = Loopback::start(move |_, _| {
                let bulk = "x".repeat(HUGE);
                Reply::status(400, if json { serde_json::json!({ "error": { "message": bulk } }).to_string() } else { bulk })
            });
            let err = provider(wire, &server.base_url, 0, 20_000).complete(&request(), soon()).unwrap_err();
            let ModelError::Failed(message) = &err else { panic!("{wire:?}: {err:?}") };
            assert!(message.contains("400"), "{message}");
            assert!(message.len() < 1024 && err.to_string().len() < 1024, "{wire:?} json={json}: {} bytes", message.len());
        }
    }
}

#[test]
fn malformed_bodies_fail_clearly() {
    for body in ["not json", r#"{"choices":[]}"#] {
        let server = Loopback::start(move |_, _| Reply::ok(body));
        let err = provider(Wire::Openai, &server.base_url, 0, 5_000).complete(&request(), soon()).unwrap_err();
        assert!(matches!(&err, ModelError::Failed(m) if m.contains("malformed")), "{err:?}");
    }
    let server = Loopback::start(|_, _| Reply::ok(r#"{"content":[{"type":"tool_use","id":"x"}]}"#));
    let err = provider(Wire::Anthropic, &server.base_url, 0, 5_000).complete(&request(), soon()).unwrap_err();
    assert!(matches!(&err, ModelError::Failed(m) if m.contains("no text")), "{err:?}");
}

#[test]
fn slow_responses_time_out_and_refused_connections_are_unavailable() {
    let server = Loopback::start(|_, _| Reply::slow(openai_reply("late"), Duration::from_secs(3)));
    let started = Instant::now();
    let err = provider(Wire::Openai, &server.base_url, 2, 300).complete(&request(), soon()).unwrap_err();
    assert_eq!(err, ModelError::Timeout);
    assert!(started.elapsed() < Duration::from_secs(2));
    // The caller's deadline wins over a longer provider timeout.
    let err = provider(Wire::Openai, &server.base_url, 0, 60_000).complete(&request(), Instant::now() + Duration::from_millis(300)).unwrap_err();
    assert_eq!(err, ModelError::Timeout);

    let err = provider(Wire::Openai, &refused_url(), 1, 2_000).complete(&request(), soon()).unwrap_err();
    assert!(matches!(err, ModelError::Unavailable(_)), "{err:?}");
}

// ---- the model chain with the real plugins ------------------------------------------------

const SUMMARY: &str = "## Goal\nShip the ledger fix.\n\n## Constraints & Preferences\n- never commit directly to main\n\n## Progress\n### Done\n- checks added\n### In Progress\n- none\n### Blocked\n- none\n\n## Key Decisions\n- reject negative amounts\n\n## Next Steps\n- run the tests\n\n## Critical Context\n- tests pass\n";

fn checkpoint_json() -> String {
    serde_json::json!({
        "task_objective": "make apply reject negative amounts", "negative_constraints": ["never commit directly to main"],
        "accepted_decisions": [], "rejected_hypotheses": [], "completed_milestones": ["checks added"], "pending_work": [],
        "verification": { "passed": ["cargo test"], "failed": [], "not_run": [] }, "external_artifacts": [],
        "next_immediate_action": "run the tests", "files_read": ["src/ledger.rs"], "files_modified": ["src/ledger.rs"]
    })
    .to_string()
}

fn model_policy(base_url: &str, timeout_ms: u64) -> Policy {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/policies/model.toml")).unwrap();
    let text = text
        .replace("http://127.0.0.1:8080/v1", &format!("{base_url}/v1"))
        .replace("api_key_env = \"OPENAI_API_KEY\"", "")
        .replace("timeout_ms = 120000", &format!("timeout_ms = {timeout_ms}"))
        .replace("max_retries = 2", "max_retries = 0");
    Policy::parse(&text, "model.toml").unwrap()
}

fn compact_with(cairn: &Cairn, policy: &Policy) -> (CompactionReport, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("model").unwrap()).unwrap();
    let policy = cairn.check_policy(policy.clone()).unwrap();
    let report = cairn.compact(&policy, &mut store, &sample::coding_session(10), "sample").unwrap();
    (report, dir)
}

fn outcomes(report: &CompactionReport) -> Vec<OutcomeClass> {
    report.steps.iter().map(|s| s.outcome).collect()
}

#[test]
fn a_reply_without_the_sections_is_invalid_and_the_checkpoint_commits() {
    // Answers the summary prompt with prose and the checkpoint prompt with schema-valid JSON.
    let server = Loopback::start(|_, r| if r.body.contains("negative_constraints") { Reply::ok(openai_reply(&checkpoint_json())) } else { Reply::ok(openai_reply("It went fine, mostly.")) });
    let (report, dir) = compact_with(&host(), &model_policy(&server.base_url, 10_000));
    assert_eq!(outcomes(&report), [OutcomeClass::Invalid, OutcomeClass::Ok], "{:#?}", report.steps);
    assert!(report.committed_by.as_deref().unwrap().starts_with("checkpoint-json@"));
    let checkpoint: serde_json::Value = serde_json::from_str(report.checkpoint.as_deref().unwrap()).unwrap();
    assert_eq!(checkpoint["negative_constraints"][0], "never commit directly to main");
    // The checkpoint is in the durable record.
    let store = Home::open(dir.path()).unwrap().existing_conversation(&ConversationKey::parse("model").unwrap()).unwrap();
    let Event::Compaction(event) = &store.events()[1] else { panic!() };
    assert_eq!(event.checkpoint, report.checkpoint);
}

#[test]
fn a_refused_connection_makes_the_model_steps_unavailable_and_the_chain_commits() {
    let (report, _dir) = compact_with(&host(), &model_policy(&refused_url(), 10_000));
    assert_eq!(outcomes(&report), [OutcomeClass::Unavailable, OutcomeClass::Unavailable, OutcomeClass::Ok], "{:#?}", report.steps);
    assert!(report.committed_by.as_deref().unwrap().starts_with("shake-elide@"));
}

#[test]
fn a_slow_model_hits_the_step_deadline_as_timeout() {
    let server = Loopback::start(|_, _| Reply::slow(openai_reply(SUMMARY), Duration::from_secs(4)));
    let (report, _dir) = compact_with(&host(), &model_policy(&server.base_url, 500));
    assert_eq!(report.steps[0].outcome, OutcomeClass::Timeout, "{:#?}", report.steps);
    assert!(report.steps[0].millis < 3_000);
    assert!(report.committed_by.is_some(), "the chain still commits");
}

#[test]
fn a_well_formed_summary_commits_and_an_embedder_model_replaces_the_endpoint() {
    struct HarnessModel;
    impl ModelProvider for HarnessModel {
        fn complete(&self, request: &ModelRequest, _: Instant) -> Result<String, ModelError> {
            assert!(!request.messages.iter().any(|m| m.content.contains(KEY)));
            Ok(SUMMARY.to_string())
        }
        fn describe(&self) -> String {
            "harness model".into()
        }
    }
    let mut cairn = host();
    cairn.set_model_provider(Arc::new(HarnessModel));
    let (report, _dir) = compact_with(&cairn, &model_policy(&refused_url(), 10_000));
    assert_eq!(outcomes(&report), [OutcomeClass::Ok]);
    let summary = report.transcript.entries.iter().find(|e| e.origin == Origin::Summary).expect("a summary entry");
    let Part::Text { text } = &summary.parts[0] else { panic!() };
    assert!(text.contains("## Goal") && text.contains("never commit directly to main"));
    // The scripted summary keeps "never commit directly to main" and drops the rest of what the
    // operator said: the ledger after it has that back, verbatim.
    let ledger = &text[text.find("## Ledger").expect("a ledger of what the summary left out")..];
    assert!(ledger.contains("- Do not change the public API of `") && ledger.contains("`, and never commit directly to main."), "{ledger}");
    assert!(report.tokens_after < report.tokens_before / 2);
}

#[test]
fn repeated_malfunctions_open_the_circuit_and_the_report_says_so() {
    let server = Loopback::start(|_, _| Reply::ok(openai_reply("no sections here")));
    let cairn = host();
    let mut policy = model_policy(&server.base_url, 10_000);
    policy.compaction.breaker_failures = 2;
    for _ in 0..2 {
        let (report, _dir) = compact_with(&cairn, &policy);
        assert_eq!(report.steps[0].outcome, OutcomeClass::Invalid);
    }
    // Both model plugins malfunctioned twice (prose is not a checkpoint either).
    let before = server.count();
    let (report, _dir) = compact_with(&cairn, &policy);
    for step in &report.steps[..2] {
        assert_eq!(step.outcome, OutcomeClass::Unavailable);
        assert!(step.message.as_deref().unwrap().contains("circuit open"), "{:#?}", report.steps);
    }
    assert_eq!(server.count(), before, "no model call while the circuits are open");
    assert_eq!(report.steps[2].outcome, OutcomeClass::Ok);
}

#[test]
fn a_spent_chain_budget_skips_the_remaining_plugins() {
    let server = Loopback::start(|_, _| Reply::slow(openai_reply("x"), Duration::from_secs(4)));
    let mut policy = model_policy(&server.base_url, 10_000);
    policy.compaction.chain_timeout_ms = 400;
    let (report, _dir) = compact_with(&host(), &policy);
    assert_eq!(outcomes(&report), [OutcomeClass::Timeout, OutcomeClass::Timeout, OutcomeClass::Timeout, OutcomeClass::Ok], "{:#?}", report.steps);
    assert!(report.steps[1].message.as_deref().unwrap().contains("budget"));
    assert!(report.steps[3].plugin.starts_with("last-resort@"));
}

// ---- the model's own window: too-long answers, chunked summaries --------------------------

const OPENAI_TOO_LONG: &str = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
const ANTHROPIC_TOO_LONG: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;

/// A request's prompt as the host counts it: each message's text and 4 tokens of framing.
fn prompt_tokens(request: &support::loopback::Request) -> u32 {
    let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
    let tokenizer = cairn::tokenizer::Tokenizer::default();
    let mut texts: Vec<String> = body["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().to_string()).collect();
    if let Some(system) = body["system"].as_str() {
        texts.push(system.to_string());
    }
    texts.iter().map(|t| tokenizer.count(t) + 4).sum()
}

fn max_tokens(request: &support::loopback::Request) -> u32 {
    serde_json::from_str::<serde_json::Value>(&request.body).unwrap()["max_tokens"].as_u64().unwrap() as u32
}

/// One native-summary step (the host's last resort after it) against `base_url`.
fn summary_policy(base_url: &str, window: Option<u32>) -> Policy {
    let window = window.map_or(String::new(), |w| format!("context_window = {w}"));
    let text = format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"{base_url}/v1\"\nmodel = \"test-model\"\n{window}\ntimeout_ms = 20000\nmax_retries = 0\n\n\
         [compaction]\nkeep_recent_tokens = 20000\nkeep_recent_at_most = 0.25\ntarget_ratio = 0.5\nchain_timeout_ms = 300000\n\n\
         [[chain]]\nplugin = \"native-summary\"\ngrants = [\"log\", \"tokens\", \"model\"]\nmemory_mib = 256\ntimeout_ms = 240000\n"
    );
    Policy::parse(&text, "summary.toml").unwrap()
}

#[test]
fn provider_too_long_answers_are_recognised_and_not_retried() {
    for (wire, body, tokens, window) in [(Wire::Openai, OPENAI_TOO_LONG, 9000, 8192), (Wire::Anthropic, ANTHROPIC_TOO_LONG, 210_000, 200_000)] {
        let server = Loopback::start(move |_, _| Reply::status(400, body));
        let err = provider(wire, &server.base_url, 2, 5_000).complete(&request(), soon()).unwrap_err();
        let ModelError::TooLong { prompt_tokens, window: told, .. } = &err else { panic!("{wire:?}: {err:?}") };
        assert_eq!((*prompt_tokens, *told), (Some(tokens), Some(window)), "{wire:?}");
        assert!(err.to_string().starts_with(&format!("prompt too long: {tokens} tokens, the model's window is {window}")), "{err}");
        assert_eq!(server.count(), 1, "{wire:?}: the same prompt would be too long again");
    }
    // Other 400s stay plain failures.
    let server = Loopback::start(|_, _| Reply::status(400, r#"{"error":{"message":"bad temperature","type":"invalid_request_error"}}"#));
    assert!(matches!(provider(Wire::Openai, &server.base_url, 0, 5_000).complete(&request(), soon()), Err(ModelError::Failed(_))));
}

#[test]
fn the_host_refuses_a_prompt_over_the_models_window_without_sending_it() {
    let server = Loopback::start(|_, _| Reply::ok(openai_reply(SUMMARY)));
    let mut cairn = host();
    let base = format!("{}/v1", server.base_url);
    cairn.set_model_provider(Arc::new(HttpProvider::new(Wire::Openai, &base, "m", None, Duration::from_secs(5), 0).with_context_window(300)));
    let (report, _dir) = compact_with(&cairn, &summary_policy(&server.base_url, None));
    let step = &report.steps[0];
    assert_eq!(step.outcome, OutcomeClass::Unavailable, "{:#?}", report.steps);
    let message = step.message.as_deref().unwrap();
    assert!(message.starts_with("too long: ") && message.contains("prompt too long: ") && message.contains("the model's window is 300"), "{message}");
    assert_eq!(server.count(), 0, "nothing over the window is sent");
    let used = step.model.unwrap();
    assert_eq!((used.calls, used.too_long), (2, 2), "one retry with a smaller chunk, then the step gives up: {used:?}");
}

#[test]
fn a_too_long_answer_is_classed_apart_and_retried_once_smaller() {
    // The first prompt is answered "too long" with OpenAI's real body; the smaller retry passes.
    let server = Loopback::start(|n, _| if n == 0 { Reply::status(400, OPENAI_TOO_LONG) } else { Reply::ok(openai_reply(SUMMARY)) });
    let (report, _dir) = compact_with(&host(), &summary_policy(&server.base_url, None));
    assert_eq!(report.steps[0].outcome, OutcomeClass::Ok, "{:#?}", report.steps);
    let used = report.steps[0].model.unwrap();
    assert_eq!(used.too_long, 1, "{used:?}");
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(used.calls as usize, requests.len());
    assert!(requests.len() >= 2);
    assert!(prompt_tokens(&requests[1]) < prompt_tokens(&requests[0]), "the retry is smaller");
    assert!(report.committed_by.as_deref().unwrap().starts_with("native-summary@"));

    // Always "too long": the step is unavailable, says `too long: ` first, and retried once.
    let server = Loopback::start(|_, _| Reply::status(400, ANTHROPIC_TOO_LONG.replace("210000", "9000").replace("200000", "8192")));
    let (report, _dir) = compact_with(&host(), &summary_policy(&server.base_url, None));
    let step = &report.steps[0];
    assert_eq!(step.outcome, OutcomeClass::Unavailable);
    assert!(step.message.as_deref().unwrap().starts_with("too long: "), "{:#?}", report.steps);
    assert_eq!(server.count(), 2, "one retry, no more");
    assert_eq!(step.model.unwrap().too_long, 2);
    assert!(report.committed_by.is_some(), "the chain still commits");
}

/// With a fake model whose window is 8k tokens, native-summary summarizes the large Pi session
/// in chunks and commits: every request fits, there are several, and the step's record counts
/// them.
#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn native_summary_summarizes_the_large_pi_session_in_chunks_under_an_8k_window() {
    const WINDOW: u32 = 8192;
    let server = Loopback::start(|_, r| if prompt_tokens(r) + max_tokens(r) > WINDOW { Reply::status(400, OPENAI_TOO_LONG) } else { Reply::ok(openai_reply(SUMMARY)) });
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/transcripts/pi/pi-mono__large-session.jsonl");
    let (transcript, _) = cairn::transcript::formats::parse(&std::fs::read_to_string(path).unwrap(), path).unwrap();
    let cairn = host();
    let dir = tempfile::tempdir().unwrap();
    let mut store = Home::open(dir.path()).unwrap().conversation(&ConversationKey::parse("large").unwrap()).unwrap();
    let policy = cairn.check_policy(summary_policy(&server.base_url, Some(WINDOW))).unwrap();
    let report = cairn.compact(&policy, &mut store, &transcript, "large").unwrap();
    let step = &report.steps[0];
    assert_eq!(step.outcome, OutcomeClass::Ok, "{:#?}", report.steps);
    assert!(report.committed_by.as_deref().unwrap().starts_with("native-summary@"));
    let requests = server.requests.lock().unwrap().clone();
    let sizes: Vec<u32> = requests.iter().map(prompt_tokens).collect();
    eprintln!("{} requests, prompt tokens {sizes:?}, max_tokens {}, tokens {} → {}", sizes.len(), max_tokens(&requests[0]), report.tokens_before, report.tokens_after);
    assert!(sizes.len() >= 3, "several chunks: {sizes:?}");
    assert!(requests.iter().all(|r| prompt_tokens(r) + max_tokens(r) <= WINDOW), "{sizes:?}");
    let used = step.model.unwrap();
    assert_eq!(used.calls as usize, requests.len(), "the record counts every chunk's call: {used:?}");
    assert_eq!(used.too_long, 0);
    assert!(used.largest_prompt_tokens < WINDOW);
    // The record keeps the count.
    let store = Home::open(dir.path()).unwrap().existing_conversation(&ConversationKey::parse("large").unwrap()).unwrap();
    let recorded = serde_json::to_string(&store.events()).unwrap();
    assert!(recorded.contains(&format!("\"calls\":{}", requests.len())), "the durable record has the model calls");
}
