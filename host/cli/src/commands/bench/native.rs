//! shake-elide built natively: the same crate as the bundled component, called directly with
//! the host's tokenizer behind the SDK's native host, on the same request the Wasm build gets.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cairn::chain::Window;
use cairn::tokenizer::Tokenizer;
use cairn::transcript::{Entry, Origin, Part, Role, Transcript};
use cairn_sdk::types as wit;
use cairn_sdk::Strategy;

/// shake-elide's own source compiled natively into this binary: the same code as the bundled
/// component, whose crate stays a `cdylib` only (so its Wasm build keeps full LTO).
#[path = "../../../../../plugins/shake-elide/src/lib.rs"]
mod shake_elide;

/// Counts with the host's tokenizer; artifacts get URIs and are dropped (storage is not what
/// this compares).
struct BenchHost {
    tokenizer: Tokenizer,
    artifacts: AtomicU32,
}

impl cairn_sdk::native::Host for BenchHost {
    fn count_tokens(&self, text: &str) -> u32 {
        self.tokenizer.count(text)
    }

    fn put_artifact(&self, _content: &str) -> Result<String, String> {
        Ok(format!("artifact://a-0000000000000000/{}", self.artifacts.fetch_add(1, Ordering::Relaxed) + 1))
    }

    fn log(&self, _level: cairn_sdk::host::log::Level, _message: &str) {}
}

/// Times one native shake-elide call on `transcript` (counted) under `window`, from the host's
/// entries to the outcome.
pub fn shake_elide(transcript: &Transcript, window: &Window, config: &str) -> Duration {
    cairn_sdk::native::install(Box::new(BenchHost { tokenizer: Tokenizer::default(), artifacts: AtomicU32::new(0) }));
    // From the host's entries to the outcome, as the Wasm path is timed: the request in the
    // SDK's types is built here as the host builds it for the component.
    let started = Instant::now();
    let entries: Vec<wit::Entry> = transcript.entries.iter().map(entry).collect();
    let request = wit::Request {
        purpose: wit::RequestKind::Compact,
        archive_id: "a-0000000000000000".into(),
        protected_head: window.protected_head as u32,
        tail_start: window.tail_start as u32,
        token_target: window.token_target,
        preserve: None,
        resume: None,
        previous_checkpoint: None,
        previous_checkpoint_through: None,
        config: config.into(),
    };
    // The component's path, natively: the conversation read through the same trait.
    let outcome = <shake_elide::ShakeElide as Strategy>::compact_lent(&entries, request);
    let elapsed = started.elapsed();
    assert!(outcome.is_ok(), "native shake-elide failed on the bench session");
    elapsed
}

fn entry(e: &Entry) -> wit::Entry {
    wit::Entry {
        id: e.id.clone(),
        role: match e.role {
            Role::System => wit::Role::System,
            Role::User => wit::Role::User,
            Role::Assistant => wit::Role::Assistant,
            Role::Tool => wit::Role::Tool,
        },
        origin: match e.origin {
            Origin::Operator => wit::Origin::Operator,
            Origin::Agent => wit::Origin::Agent,
            Origin::Tool => wit::Origin::Tool,
            Origin::Harness => wit::Origin::Harness,
            Origin::Summary => wit::Origin::Summary,
        },
        parts: e.parts.iter().map(part).collect(),
        tokens: e.tokens,
        turn: e.turn,
        pinned: e.pinned,
    }
}

fn part(p: &Part) -> wit::Part {
    match p {
        Part::Text { text } => wit::Part::Text(text.clone()),
        Part::Thinking { text } => wit::Part::Thinking(text.clone()),
        Part::ToolCall { id, name, args } => wit::Part::ToolCall(wit::ToolCall { id: id.clone(), name: name.clone(), args: args.clone() }),
        Part::ToolResult { call_id, content, is_error, elided } => {
            wit::Part::ToolResult(wit::ToolResult { call_id: call_id.clone(), content: content.clone(), is_error: *is_error, elided: elided.clone() })
        }
        Part::Image { reference } => wit::Part::Image(reference.clone()),
        Part::Placeholder { text, uri } => wit::Part::Placeholder(wit::Placeholder { text: text.clone(), uri: uri.clone() }),
    }
}
