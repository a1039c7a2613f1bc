//! The harness API: the operations an agent harness calls, each a typed request and a typed
//! answer ([`api`]), taking a transcript in any format Cairn reads and answering in the
//! caller's format. `cairn serve`'s MCP tools are a mapping of names and schemas onto these
//! operations; the Python and Node packages bind the same ones.
//!
//! Every operation is blocking (Wasm and storage run on the calling thread): call it from a
//! thread that may block (tokio's blocking pool, a Python thread without the GIL). Calls for
//! one conversation are serialized by the storage's lock; a shell that wants them in arrival
//! order queues them per conversation itself (`cairn serve` does).

pub mod api;
mod error;
mod prefix;
mod source;

pub use api::*;
pub use error::{Error, Result};

use crate::lifecycle::{self, AgentRequest, BoundaryReport, RequestKind};
use crate::storage::{ArtifactUri, ConversationKey, Home};
use crate::transcript::formats::{self, Format};
use crate::transcript::Transcript;
use crate::{Lifecycle, RunOptions};
use prefix::Kept;
use source::{Files, Source};

/// The operations, on one lifecycle (its host, policy and home). Cheap to clone.
#[derive(Clone)]
pub struct Harness {
    lifecycle: Lifecycle,
    files: Files,
}

/// A conversation key from a request, or why it is not one.
pub fn conversation_key(text: &str) -> Result<ConversationKey> {
    ConversationKey::parse(text).map_err(|e| Error::InvalidRequest(format!("conversation: {e}")))
}

impl Harness {
    /// The operations on `lifecycle`; a request may name a transcript file by `path`.
    pub fn new(lifecycle: Lifecycle) -> Self {
        Harness { lifecycle, files: Files::Read }
    }

    /// The same, refusing a request that names a file on this host's disk: `why` is what the
    /// caller is told (a server refuses its remote clients).
    pub fn refusing_files(self, why: impl Into<String>) -> Self {
        Harness { files: Files::Refused(why.into()), ..self }
    }

    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// Compacts a transcript now under the policy and records it durably (a dry run records
    /// nothing).
    pub fn compact(&self, request: CompactRequest) -> Result<Compacted> {
        self.run(request, false)
    }

    /// Hands the conversation over to a fresh session: archives it and returns the seed.
    pub fn handover(&self, request: CompactRequest) -> Result<Compacted> {
        self.run(request, true)
    }

    fn run(&self, mut request: CompactRequest, handover: bool) -> Result<Compacted> {
        let conversation = conversation_key(&request.conversation)?;
        let (transcript, format) = Source::required(request.transcript.take(), request.path.take(), &self.files)?.parse()?;
        let dry_run = request.dry_run.unwrap_or(false);
        let home = self.lifecycle.home();
        let mut store = if dry_run { home.preview(&conversation)? } else { home.conversation(&conversation)? };
        let options = RunOptions {
            preserve: request.preserve.as_deref(),
            resume: request.resume.as_deref(),
            workspace: self.lifecycle.workspace(),
            window: request.window,
            budget: request.budget,
            dry_run,
            usage: Some(UsageArg::resolve(request.usage.take(), &transcript)),
            ..RunOptions::default()
        };
        let (cairn, policy) = (self.lifecycle.cairn(), self.lifecycle.policy());
        let run = if handover { cairn.handover_with(policy, &mut store, &transcript, "serve", options)? } else { cairn.compact_with(policy, &mut store, &transcript, "serve", options)? };
        let Kept { first_kept_entry_id, prefix_summary } = Kept::of(&transcript, &run);
        let (format, text) = write(&run.transcript, format, request.include_transcript);
        Ok(Compacted { report: Report::from(&run), format, transcript: text, first_kept_entry_id, prefix_summary, unrecognized: UnrecognizedKinds::of(&transcript) })
    }

    /// A turn boundary: the trigger, the commit policy and the chain decide what happens.
    pub fn boundary(&self, mut request: BoundaryRequest) -> Result<BoundaryAnswer> {
        let conversation = conversation_key(&request.conversation)?;
        let source = Source::required(request.transcript.take(), request.path.take(), &self.files)?;
        let (transcript, format) = match &request.since {
            None => source.parse()?,
            Some(_) => source.parse_appended(request.format.as_deref())?,
        };
        let input = transcript.clone();
        let usage = UsageArg::resolve(request.usage, &transcript);
        let reported = BoundaryReport {
            conversation,
            turn: request.turn,
            turn_complete: request.turn_complete.unwrap_or(true),
            tool_call_outstanding: request.tool_call_outstanding.unwrap_or(false),
            window: request.window,
            reserve: request.reserve.unwrap_or(16_384),
            usage,
            transcript,
        };
        let dry_run = request.dry_run.unwrap_or(false);
        let incremental = request.since.is_some();
        let lifecycle = &self.lifecycle;
        let outcome = match (request.since, dry_run) {
            (None, false) => lifecycle.boundary_blocking(reported)?,
            (None, true) => lifecycle.dry_run_blocking(reported)?,
            (Some(since), false) => lifecycle.boundary_since_blocking(reported, Some(since))?,
            (Some(since), true) => lifecycle.dry_run_since_blocking(reported, Some(since))?,
        };
        let action = serde_json::to_value(&outcome.action).map_err(anyhow::Error::from)?;
        let kept = outcome.report.as_ref().map(|run| Kept::of(outcome.before.as_ref().unwrap_or(&input), run)).unwrap_or_default();
        // An incremental call gets the context back only when maintenance changed it.
        let changed = outcome.before.is_some() || matches!(outcome.action, lifecycle::Action::HandedOver);
        let wanted = request.include_transcript.or(incremental.then_some(changed));
        let (format, transcript) = write(&outcome.transcript, format, wanted);
        Ok(BoundaryAnswer {
            turn: outcome.turn,
            action: ActionTaken { kind: action["kind"].as_str().unwrap_or_default().to_string(), reason: action.get("reason").and_then(|r| r.as_str()).map(str::to_string).or(outcome.why.clone()) },
            advice: outcome.advice,
            usage: outcome.usage,
            report: outcome.report.as_ref().map(Report::from),
            notices: outcome.notices,
            format,
            transcript,
            first_kept_entry_id: kept.first_kept_entry_id,
            stale_files: outcome.stale_files.iter().map(|f| StaleFile { path: f.path.clone(), change: f.change.word().into() }).collect(),
            prefix_summary: kept.prefix_summary,
            unrecognized: UnrecognizedKinds::of(&input),
            dry_run,
            acknowledged: outcome.acknowledged,
        })
    }

    /// Records an agent's request for maintenance; it runs at the next boundary the cooldown allows.
    pub fn request(&self, request: MaintenanceRequest) -> Result<Recorded> {
        let conversation = conversation_key(&request.conversation)?;
        let what = match request.kind {
            MaintenanceKind::Compact => "compaction",
            MaintenanceKind::Handover => "handover to a fresh session",
        };
        self.lifecycle.request_blocking(&conversation, agent_request(request.kind, request.preserve, request.resume))?;
        // Worded for the agent: its `context_maintenance` tool answers this, in every shell.
        Ok(Recorded {
            recorded: true,
            message: format!(
                "Recorded. Finish the current turn at a coherent checkpoint (no half-done edits, tests run); the {what} \
                 happens at the next safe boundary after this turn, keeping what you asked to preserve."
            ),
        })
    }

    /// The conversation's notices not yet acknowledged, oldest first.
    pub fn notices(&self, request: ConversationRequest) -> Result<Notices> {
        let conversation = conversation_key(&request.conversation)?;
        let notices = lifecycle::take_notices(self.lifecycle.home(), &conversation)?;
        Ok(Notices { notices: notices.into_iter().map(|n| Notice { id: n.id, kind: n.kind, text: n.text, at: n.at }).collect() })
    }

    /// Acknowledges the conversation's notices `ids`: they are not delivered again.
    pub fn acknowledge(&self, request: AckRequest) -> Result<Acknowledged> {
        let conversation = conversation_key(&request.conversation)?;
        if !request.ids.is_empty() {
            let mut store = self.lifecycle.home().existing_conversation_to_write(&conversation)?;
            for id in &request.ids {
                store.ack_notice(id)?;
            }
        }
        Ok(Acknowledged { acknowledged: request.ids.len() })
    }

    /// Undoes a compaction (default the latest) and every later one; answers the restored
    /// context in the caller's format.
    pub fn undo(&self, mut request: UndoRequest) -> Result<Restored> {
        let conversation = conversation_key(&request.conversation)?;
        let current = Source::of(request.transcript.take(), request.path.take(), &self.files)?.map(|source| source.parse()).transpose()?;
        let mut store = self.lifecycle.home().existing_conversation_to_write(&conversation)?;
        let undone = crate::undo::undo(&mut store, &self.lifecycle.cairn().tokenizer(), current.as_ref().map(|(t, _)| t), request.archive_id.as_deref())?;
        let format = current.map(|(_, f)| f).unwrap_or(Format::Cairn);
        let (format, transcript) = write(&undone.transcript, format, Some(true));
        Ok(Restored { undone: undone.undone, tokens_before: undone.tokens_before, tokens_after: undone.tokens_after, format, transcript })
    }

    /// Pins entries by id, checked against the policy's pin budget.
    pub fn pin(&self, request: PinRequest) -> Result<Pins> {
        self.pins(request, true)
    }

    /// Unpins entries pinned by id; an id not pinned is refused.
    pub fn unpin(&self, request: PinRequest) -> Result<Pins> {
        self.pins(request, false)
    }

    fn pins(&self, request: PinRequest, pinned: bool) -> Result<Pins> {
        let conversation = conversation_key(&request.conversation)?;
        let mut store = self.lifecycle.home().existing_conversation_to_write(&conversation)?;
        if pinned {
            crate::pins::pin(&mut store, &self.lifecycle.cairn().tokenizer(), &request.ids, &self.lifecycle.policy().pins)?;
        } else {
            crate::pins::unpin(&mut store, &request.ids)?;
        }
        Ok(Pins { pinned: store.pinned_ids().into_iter().collect() })
    }

    /// What compaction did: the timeline, or one compaction part by part.
    pub fn show(&self, request: ShowRequest) -> Result<Shown> {
        let conversation = conversation_key(&request.conversation)?;
        let home = self.lifecycle.home();
        if !home.conversations()?.contains(&conversation) {
            return Err(Error::NotFound(format!("no conversation {conversation}")));
        }
        let store = home.existing_conversation(&conversation)?;
        let json = |value: serde_json::Result<serde_json::Value>| value.map_err(|e| Error::Internal(e.to_string()));
        Ok(match &request.archive_id {
            None => Shown { timeline: Some(json(serde_json::to_value(crate::show::timeline(&store)))?), compaction: None },
            Some(id) => Shown { timeline: None, compaction: Some(json(serde_json::to_value(crate::show::compaction(&store, id)?))?) },
        })
    }

    /// The stored original behind an `artifact://` URI (see [`artifact`]).
    pub fn artifact(&self, request: ArtifactRequest) -> Result<Artifact> {
        artifact(self.lifecycle.home(), request)
    }

    /// `session_history` for `conversation` (see [`recall`]).
    pub fn recall(&self, conversation: &ConversationKey, arguments: &str) -> Result<serde_json::Value> {
        recall(self.lifecycle.home(), conversation, arguments)
    }

    /// Per-conversation switches over the policy, persisted.
    pub fn switches(&self, request: SwitchesRequest) -> Result<Switches> {
        let conversation = conversation_key(&request.conversation)?;
        let home = self.lifecycle.home();
        if request.resume == Some(true) {
            lifecycle::resume(home, &conversation)?;
        }
        let (overlay, paused) = lifecycle::set_overlay(home, &conversation, request.maintenance, request.auto_handover)?;
        Ok(Switches { overlay: SwitchesSet { maintenance: overlay.maintenance, auto_handover: overlay.auto_handover }, paused })
    }
}

/// The operations by name, JSON in and JSON out: the names are `cairn serve`'s tools (and
/// `history`, the agent's `session_history` for a conversation). What a binding calls — the
/// Python and Node packages declare nothing of their own.
pub const OPERATIONS: &[&str] = &["compact", "handover", "boundary", "request", "notices_take", "notices_ack", "undo", "pin", "unpin", "show", "artifact_get", "policy_set", "history"];

impl Harness {
    /// Runs `operation` (one of [`OPERATIONS`]) on `request`, a JSON object of the operation's
    /// request type, and answers its answer as JSON. A request that does not fit the type is
    /// `InvalidRequest`, naming the field.
    pub fn call(&self, operation: &str, request: serde_json::Value) -> Result<serde_json::Value> {
        fn parsed<T: serde::de::DeserializeOwned>(operation: &str, request: serde_json::Value) -> Result<T> {
            serde_json::from_value(request).map_err(|e| Error::InvalidRequest(format!("{operation}: {e}")))
        }
        fn answer<T: serde::Serialize>(answer: Result<T>) -> Result<serde_json::Value> {
            serde_json::to_value(answer?).map_err(|e| Error::Internal(e.to_string()))
        }
        match operation {
            "compact" => answer(self.compact(parsed(operation, request)?)),
            "handover" => answer(self.handover(parsed(operation, request)?)),
            "boundary" => answer(self.boundary(parsed(operation, request)?)),
            "request" => answer(self.request(parsed(operation, request)?)),
            "notices_take" => answer(self.notices(parsed(operation, request)?)),
            "notices_ack" => answer(self.acknowledge(parsed(operation, request)?)),
            "undo" => answer(self.undo(parsed(operation, request)?)),
            "pin" => answer(self.pin(parsed(operation, request)?)),
            "unpin" => answer(self.unpin(parsed(operation, request)?)),
            "show" => answer(self.show(parsed(operation, request)?)),
            "artifact_get" => answer(self.artifact(parsed(operation, request)?)),
            "policy_set" => answer(self.switches(parsed(operation, request)?)),
            "history" => {
                // `{conversation, …}`: the rest is the `session_history` call as a model sends it.
                let serde_json::Value::Object(mut fields) = request else { return Err(Error::InvalidRequest("history: expected a JSON object".into())) };
                let conversation = match fields.remove("conversation") {
                    Some(serde_json::Value::String(key)) => conversation_key(&key)?,
                    _ => return Err(Error::InvalidRequest("history: `conversation` (a string) is required".into())),
                };
                self.recall(&conversation, &serde_json::Value::Object(fields).to_string())
            }
            other => Err(Error::InvalidRequest(format!("unknown operation {}: {}", crate::echo::input(other), OPERATIONS.join(", ")))),
        }
    }
}

/// The stored original behind an `artifact://` URI, in any conversation of `home`. Storage
/// only: a shell may answer it before its plugins are loaded.
pub fn artifact(home: &Home, request: ArtifactRequest) -> Result<Artifact> {
    let uri: ArtifactUri = request.uri.parse().map_err(|e: crate::storage::IdError| Error::InvalidRequest(e.to_string()))?;
    let bytes = home.find_artifact(&uri)?;
    let content = String::from_utf8(bytes).map_err(|_| Error::Refused("the artifact is not UTF-8 text; read it with `cairn artifact`".into()))?;
    Ok(Artifact { uri: request.uri, bytes: content.len(), content })
}

/// `session_history` for `conversation` of `home`: `arguments` as the model sent them (JSON).
/// A model hands a failed call's message back as `{"error": …}` (`crate::recall::execute_json`);
/// the error's kind says what went wrong. Storage only.
pub fn recall(home: &Home, conversation: &ConversationKey, arguments: &str) -> Result<serde_json::Value> {
    let call: crate::recall::HistoryCall = serde_json::from_str(arguments).map_err(|e| Error::InvalidRequest(e.to_string()))?;
    Ok(crate::recall::execute(home, conversation, &call)?)
}

fn agent_request(kind: MaintenanceKind, preserve: String, resume: String) -> AgentRequest {
    let kind = match kind {
        MaintenanceKind::Compact => RequestKind::Compact,
        MaintenanceKind::Handover => RequestKind::Handover,
    };
    AgentRequest { kind, preserve, resume }
}

/// `transcript` in the caller's format when Cairn writes it, else Cairn JSONL ("" when not
/// wanted), with the name of the format written.
fn write(transcript: &Transcript, format: Format, wanted: Option<bool>) -> (&'static str, String) {
    let format = if format.writable() { format } else { Format::Cairn };
    let text = if wanted.unwrap_or(true) { formats::write(format, transcript).unwrap_or_default() } else { String::new() };
    (format.name(), text)
}
