//! Recall for the agent: the `session_history` tool a harness can expose to its model, and the
//! code that executes its calls against one conversation's archives — bounded like every
//! other archive read, and unable to reach any other conversation.

use std::io::Read;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::storage::archive::ReadError;
use crate::storage::{ArtifactUri, ConversationKey, Home};

/// Longest piece of an artifact one call returns.
pub const ARTIFACT_SLICE_CHARS: usize = 20_000;
const DEFAULT_LIMIT: usize = 10;

/// One call of the `session_history` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum HistoryCall {
    /// An overview of what earlier compactions and handovers set aside.
    Summary,
    Search {
        query: String,
        #[serde(default)]
        offset: usize,
        #[serde(default = "default_limit")]
        limit: usize,
    },
    Page {
        archive_id: String,
        #[serde(default)]
        offset: usize,
        #[serde(default = "default_limit")]
        limit: usize,
        #[serde(default)]
        char_offset: usize,
    },
    Artifact {
        uri: String,
        #[serde(default)]
        char_offset: usize,
    },
}

fn default_limit() -> usize {
    DEFAULT_LIMIT
}

/// The tool definition (name, description, JSON schema of the arguments) to give a model.
pub fn tool_definition() -> Value {
    json!({
        "name": "session_history",
        "description": "Look back into parts of this conversation that were compacted away. \
            `summary` lists what was set aside; `search` finds archived entries by keywords; \
            `page` reads an archive's entries in slices; `artifact` resolves an artifact:// URI \
            from a placeholder. Results are bounded; follow next_offset / next_char_offset to read on.",
        "parameters": {
            "type": "object",
            "additionalProperties": false,
            "required": ["action"],
            "properties": {
                "action": { "type": "string", "enum": ["summary", "search", "page", "artifact"] },
                "query": { "type": "string", "maxLength": crate::storage::archive::QUERY_MAX_CHARS, "description": "search: keywords" },
                "archive_id": { "type": "string", "pattern": "^a-[0-9a-f]{16}$", "description": "page: which archive" },
                "uri": { "type": "string", "pattern": "^artifact://a-[0-9a-f]{16}/[1-9][0-9]{0,6}$", "description": "artifact: the URI from a placeholder" },
                "offset": { "type": "integer", "minimum": 0, "description": "search, page: first hit or entry" },
                "limit": { "type": "integer", "minimum": 1, "maximum": crate::storage::archive::PAGE_MAX_ENTRIES },
                "char_offset": { "type": "integer", "minimum": 0, "description": "page, artifact: continue a long text" }
            }
        }
    })
}

/// Executes a call given as the model's JSON arguments. Errors come back as `{"error": …}`,
/// which is what a harness should hand the model.
pub fn execute_json(home: &Home, conversation: &ConversationKey, arguments: &str) -> Value {
    let call: Result<HistoryCall, _> = serde_json::from_str(arguments);
    match call.map_err(|e| e.to_string()).and_then(|call| execute(home, conversation, &call).map_err(|e| e.to_string())) {
        Ok(value) => value,
        Err(error) => json!({ "error": error }),
    }
}

/// Executes one call against `conversation` only.
pub fn execute(home: &Home, conversation: &ConversationKey, call: &HistoryCall) -> anyhow::Result<Value> {
    // A conversation never compacted has no history yet: an empty answer, not an error.
    if !home.conversations()?.contains(conversation) {
        match call {
            HistoryCall::Summary => return Ok(json!({ "text": "Nothing in this conversation has been compacted yet: there is no history to read.", "truncated": false })),
            HistoryCall::Search { .. } => return Ok(json!({ "hits": [], "total": 0, "next_offset": null, "clamped": null })),
            HistoryCall::Page { .. } | HistoryCall::Artifact { .. } => {}
        }
    }
    let store = home.existing_conversation(conversation)?;
    let view = store.archive_view()?;
    Ok(match call {
        HistoryCall::Summary => serde_json::to_value(view.summary())?,
        HistoryCall::Search { query, offset, limit } => serde_json::to_value(view.search(query, *offset, *limit)?)?,
        HistoryCall::Page { archive_id, offset, limit, char_offset } => serde_json::to_value(view.page(archive_id, *offset, *limit, *char_offset)?)?,
        HistoryCall::Artifact { uri, char_offset } => {
            let uri: ArtifactUri = uri.parse()?;
            let mut text = String::new();
            store.read_artifact(&uri)?.as_slice().read_to_string(&mut text).map_err(|_| ReadError::Unreadable("artifact is not UTF-8".into()))?;
            let total = text.chars().count();
            let start = (*char_offset).min(total);
            let piece: String = text.chars().skip(start).take(ARTIFACT_SLICE_CHARS).collect();
            let end = start + piece.chars().count();
            json!({ "uri": uri.to_string(), "text": piece, "char_offset": start, "total_chars": total,
                    "next_char_offset": (end < total).then_some(end) })
        }
    })
}
