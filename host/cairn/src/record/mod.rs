//! The record types every layer shares: how steps ended, the events of the durable record,
//! the lifecycle's questions and answers, and the report of one compaction. Nothing here
//! depends on anything above `transcript`.

mod decision;
mod event;
mod report;
mod step;

pub use decision::{kept_summary_ids, AgentRequest, Boundary, CommitDecision, Proposal, RequestKind, TriggerDecision, TriggerInput};
pub use event::{now_millis, CompactionEvent, Event, Notice, Sessions, StageRecord, UndoEvent};
pub use report::CompactionReport;
pub use step::{clip_message, FactFlag, FlagKind, ModelUse, OutcomeClass, Purpose, StepReport, MAX_FACT_FLAGS, MAX_MESSAGE_CHARS, TOO_LONG_MESSAGE_PREFIX};
