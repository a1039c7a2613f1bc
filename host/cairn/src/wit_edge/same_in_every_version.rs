//! The conversions whose WIT types are the same in every contract version, written once and
//! expanded in each version's `convert` module against that version's generated types (`wit`,
//! `wit_archive`, `wit_model` in scope there). A version whose types differ defines its own.

macro_rules! same_in_every_version {
    () => {
        /// What a strategy answered instead of an outcome. A plugin's own words are clipped
        /// before they reach a log line or the record.
        fn strategy_error(error: wit::StrategyError) -> StepError {
            match error {
                wit::StrategyError::Unavailable(why) => StepError::Unavailable(clip_message(&why)),
                wit::StrategyError::NothingToDo(why) => StepError::NoProgress(clip_message(&why)),
                wit::StrategyError::Failed(why) => StepError::Invalid(format!("plugin reported failure: {}", clip_message(&why))),
            }
        }

        impl From<wit::Entry> for Entry {
            fn from(e: wit::Entry) -> Self {
                Entry {
                    id: e.id,
                    role: match e.role {
                        wit::Role::System => Role::System,
                        wit::Role::User => Role::User,
                        wit::Role::Assistant => Role::Assistant,
                        wit::Role::Tool => Role::Tool,
                    },
                    origin: match e.origin {
                        wit::Origin::Operator => Origin::Operator,
                        wit::Origin::Agent => Origin::Agent,
                        wit::Origin::Tool => Origin::Tool,
                        wit::Origin::Harness => Origin::Harness,
                        wit::Origin::Summary => Origin::Summary,
                    },
                    parts: e.parts.into_iter().map(Part::from).collect(),
                    tokens: e.tokens,
                    turn: e.turn,
                    pinned: e.pinned,
                    // Host-side metadata the contract does not carry; `invariants::apply` restores
                    // it on entries a plugin hands back.
                    response: None,
                    reported_tokens: None,
                }
            }
        }

        impl From<wit::Part> for Part {
            fn from(p: wit::Part) -> Self {
                match p {
                    wit::Part::Text(text) => Part::Text { text },
                    wit::Part::Thinking(text) => Part::Thinking { text },
                    wit::Part::ToolCall(c) => Part::ToolCall { id: c.id, name: c.name, args: c.args },
                    wit::Part::ToolResult(r) => Part::ToolResult { call_id: r.call_id, content: r.content, is_error: r.is_error, elided: r.elided },
                    wit::Part::Image(reference) => Part::Image { reference },
                    wit::Part::Placeholder(p) => Part::Placeholder { text: p.text, uri: p.uri },
                }
            }
        }

        // ---- trigger and commit policy ----------------------------------------------------------

        impl From<&AgentRequest> for wit::AgentRequest {
            fn from(r: &AgentRequest) -> Self {
                wit::AgentRequest {
                    kind: match r.kind {
                        RequestKind::Compact => wit::RequestKind::Compact,
                        RequestKind::Handover => wit::RequestKind::Handover,
                    },
                    preserve: r.preserve.clone(),
                    resume: r.resume.clone(),
                }
            }
        }

        impl From<OutcomeClass> for wit::OutcomeClass {
            fn from(c: OutcomeClass) -> Self {
                match c {
                    OutcomeClass::Ok => wit::OutcomeClass::Ok,
                    OutcomeClass::Trap => wit::OutcomeClass::Trap,
                    OutcomeClass::Timeout => wit::OutcomeClass::Timeout,
                    OutcomeClass::Oom => wit::OutcomeClass::Oom,
                    OutcomeClass::Denied => wit::OutcomeClass::Denied,
                    OutcomeClass::Invalid => wit::OutcomeClass::Invalid,
                    OutcomeClass::Invariant => wit::OutcomeClass::Invariant,
                    OutcomeClass::NoProgress => wit::OutcomeClass::NoProgress,
                    OutcomeClass::Unavailable => wit::OutcomeClass::Unavailable,
                    OutcomeClass::Rejected => wit::OutcomeClass::Rejected,
                }
            }
        }

        pub fn trigger_input(input: &TriggerInput, config: &str) -> wit::TriggerInput {
            wit::TriggerInput {
                usage: wit::Usage { context_tokens: input.context_tokens, window: input.window, reserve: input.reserve },
                turn: input.turn,
                turns_since_maintenance: input.turns_since_maintenance,
                cooldown_left: input.cooldown_left,
                pending_request: input.pending.as_ref().map(Into::into),
                recent_outcomes: input.recent.iter().map(|c| (*c).into()).collect(),
                config: config.to_string(),
            }
        }

        pub fn commit_question(boundary: &Boundary, proposal: &Proposal, config: &str) -> (wit::Boundary, wit::Proposal) {
            (
                wit::Boundary { turn: boundary.turn, turn_complete: boundary.turn_complete, tool_call_outstanding: boundary.tool_call_outstanding, config: config.to_string() },
                wit::Proposal {
                    strategy: proposal.strategy.clone(),
                    tokens_before: proposal.tokens_before,
                    tokens_after: proposal.tokens_after,
                    replaced_ids: proposal.replaced_ids.clone(),
                    kept_summary_ids: proposal.kept_summary_ids.clone(),
                },
            )
        }

        impl From<wit::TriggerDecision> for TriggerDecision {
            fn from(d: wit::TriggerDecision) -> Self {
                match d {
                    wit::TriggerDecision::None => TriggerDecision::None,
                    wit::TriggerDecision::Advise(text) => TriggerDecision::Advise(text),
                    wit::TriggerDecision::Compact(reason) => TriggerDecision::Compact(reason),
                    wit::TriggerDecision::Handover(reason) => TriggerDecision::Handover(reason),
                }
            }
        }

        impl From<wit::CommitDecision> for CommitDecision {
            fn from(d: wit::CommitDecision) -> Self {
                match d {
                    wit::CommitDecision::Commit => CommitDecision::Commit,
                    wit::CommitDecision::Defer(why) => CommitDecision::Defer(why),
                    wit::CommitDecision::Reject(why) => CommitDecision::Reject(why),
                }
            }
        }

        // ---- capabilities -----------------------------------------------------------------------

        pub fn level(level: super::bindings::log::Level) -> tracing::Level {
            use super::bindings::log::Level;
            match level {
                Level::Trace => tracing::Level::TRACE,
                Level::Debug => tracing::Level::DEBUG,
                Level::Info => tracing::Level::INFO,
                Level::Warn => tracing::Level::WARN,
                Level::Error => tracing::Level::ERROR,
            }
        }

        pub fn model_request(request: wit_model::CompletionRequest) -> ModelRequest {
            ModelRequest { messages: request.messages.into_iter().map(|m| ChatMessage { role: m.role, content: m.content }).collect(), max_tokens: request.max_tokens }
        }

        impl From<ModelError> for wit_model::ModelError {
            fn from(e: ModelError) -> Self {
                match e {
                    ModelError::Unavailable(why) => wit_model::ModelError::Unavailable(why),
                    ModelError::Timeout => wit_model::ModelError::Timeout,
                    ModelError::Failed(why) => wit_model::ModelError::Failed(why),
                    // The contract has no variant of its own for it: the stable text is the signal.
                    too_long @ ModelError::TooLong { .. } => wit_model::ModelError::Failed(too_long.to_string()),
                }
            }
        }

        impl From<ArchiveError> for wit_archive::ArchiveError {
            fn from(e: ArchiveError) -> Self {
                match e {
                    ArchiveError::Denied(refusal) => wit_archive::ArchiveError::Denied(refusal.to_string()),
                    ArchiveError::Read(ReadError::NotFound(m)) => wit_archive::ArchiveError::NotFound(m),
                    ArchiveError::Read(ReadError::Invalid(m)) | ArchiveError::TooLarge(m) => wit_archive::ArchiveError::Invalid(m),
                    ArchiveError::Read(ReadError::Unreadable(m)) | ArchiveError::Unavailable(m) => wit_archive::ArchiveError::Unavailable(m),
                }
            }
        }

        impl From<Summary> for wit_archive::Summary {
            fn from(s: Summary) -> Self {
                wit_archive::Summary { text: s.text, truncated: s.truncated }
            }
        }

        impl From<Hits> for wit_archive::Hits {
            fn from(found: Hits) -> Self {
                wit_archive::Hits { hits: found.hits.into_iter().map(hit).collect(), total: saturate(found.total), next_offset: found.next_offset.map(saturate), clamped: found.clamped }
            }
        }

        impl From<Page> for wit_archive::Page {
            fn from(page: Page) -> Self {
                wit_archive::Page {
                    archive_id: page.archive_id,
                    entries: page.entries.into_iter().map(slice).collect(),
                    total: saturate(page.total),
                    next_offset: page.next_offset.map(saturate),
                    clamped: page.clamped,
                }
            }
        }

        fn hit(h: Hit) -> wit_archive::Hit {
            wit_archive::Hit { archive_id: h.archive_id, index: saturate(h.index), entry_id: h.entry_id, score: h.score, snippet: h.snippet, char_offset: saturate(h.char_offset) }
        }

        fn slice(s: EntrySlice) -> wit_archive::EntrySlice {
            wit_archive::EntrySlice {
                index: saturate(s.index),
                entry_id: s.entry_id,
                role: s.role,
                text: s.text,
                char_offset: saturate(s.char_offset),
                total_chars: saturate(s.total_chars),
                next_char_offset: s.next_char_offset.map(saturate),
            }
        }

        fn saturate(n: usize) -> u32 {
            u32::try_from(n).unwrap_or(u32::MAX)
        }
    };
}

pub(crate) use same_in_every_version;
