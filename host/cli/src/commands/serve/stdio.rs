//! `cairn serve` over stdio: newline-delimited JSON-RPC, with the request size limit rmcp's own
//! stdio transport lacks an answer for (it drops an oversized line and its caller waits
//! forever). rmcp runs over a stream of decoded messages and a pipe for its answers:
//! - stdin → `read_requests` → rmcp: a line within `--max-request-bytes` is decoded and passed
//!   on; a longer one is skipped to its newline in chunks (never held whole) and answered with a
//!   JSON-RPC error carrying the id found in its head;
//! - rmcp → `write_responses` → stdout: rmcp's output copied through, the errors put only
//!   between its complete lines, every complete line flushed.
//!
//! EOF on stdin ends rmcp's session, whose output then ends; everything written is flushed
//! before the server exits.

use anyhow::{Context, Result};
use bytes::BytesMut;
use rmcp::model::{CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorData, JsonRpcVersion2_0, Request, RequestId, ServerJsonRpcMessage};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use rmcp::ServiceExt;
use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::codec::{Decoder, FramedWrite};

use super::limit;
use super::tools::Server;

/// The in-process pipe's buffer.
const PIPE_BYTES: usize = 256 * 1024;
/// Requests decoded ahead of rmcp: stdin is not read further while rmcp is this far behind.
const QUEUED_REQUESTS: usize = 16;

pub async fn serve(server: Server, max_request_bytes: usize) -> Result<()> {
    let (requests, rmcp_in) = mpsc::channel(QUEUED_REQUESTS);
    let (rmcp_out, responses) = tokio::io::duplex(PIPE_BYTES);
    let (errors, refused) = mpsc::unbounded_channel();
    let reading = tokio::spawn(read_requests(BufReader::with_capacity(PIPE_BYTES, tokio::io::stdin()), requests, errors, max_request_bytes));
    let writing = tokio::spawn(write_responses(responses, refused, tokio::io::stdout()));
    let incoming = futures::stream::unfold(rmcp_in, |mut rmcp_in| async move { rmcp_in.recv().await.map(|message| (message, rmcp_in)) });
    let outgoing = FramedWrite::new(rmcp_out, JsonRpcMessageCodec::<ServerJsonRpcMessage>::default());
    let running = server.serve((outgoing, Box::pin(incoming))).await.context("starting the MCP session")?;
    running.waiting().await.context("serving MCP")?;
    writing.await.context("writing responses")?.context("writing to stdout")?;
    if reading.is_finished() {
        reading.await.context("reading requests")?.context("reading stdin")?;
    }
    Ok(())
}

/// What a line of stdin is to rmcp.
enum Decoded {
    Message(Box<ClientJsonRpcMessage>),
    /// Not JSON (as the other MCP SDKs, no answer: there is no id to answer, and an answer to
    /// garbage can start an echo storm), or a notification rmcp ignores.
    Ignored,
    /// JSON, but not a JSON-RPC message: rmcp's own answer, "Invalid request".
    Invalid,
}

/// A `tools/call` without `_meta`, read in one pass. rmcp reads every message through serde's
/// untagged and flattened enums, which buffer the message and copy each string several times:
/// with a whole session sent as a tool's argument (MBs), 30 % of the server's samples, more
/// than the compaction's own parse of it. This reads the same message into the same value; any
/// other line (or a call with `_meta`, which rmcp moves into the request's extensions) goes
/// through rmcp's codec.
#[derive(Deserialize)]
struct ToolCall {
    #[allow(dead_code)] // checked by its Deserialize ("2.0")
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    method: String,
    params: CallToolRequestParams,
}

fn decode(line: &[u8]) -> Decoded {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if let Ok(call) = serde_json::from_slice::<ToolCall>(line) {
        if call.method == "tools/call" && call.params.meta.is_none() {
            return Decoded::Message(Box::new(ClientJsonRpcMessage::request(ClientRequest::CallToolRequest(Request::new(call.params)), call.id)));
        }
    }
    let mut buffer = BytesMut::from(line);
    buffer.extend_from_slice(b"\n");
    match JsonRpcMessageCodec::<ClientJsonRpcMessage>::default().decode(&mut buffer) {
        Ok(Some(message)) => Decoded::Message(Box::new(message)),
        Ok(None) => Decoded::Ignored,
        Err(JsonRpcMessageCodecError::Serde(e)) if matches!(e.classify(), serde_json::error::Category::Data | serde_json::error::Category::Io) => Decoded::Invalid,
        Err(e) => {
            tracing::debug!("ignoring an unparsable message: {e}");
            Decoded::Ignored
        }
    }
}

/// rmcp's answer to JSON that is not a JSON-RPC message.
fn invalid_request() -> String {
    serde_json::to_string(&ServerJsonRpcMessage::error(ErrorData::invalid_request("Invalid request", None), None)).expect("an error message serializes")
}

/// Decodes each line of `input` within `limit` bytes for `rmcp`; answers a longer one (and one
/// that is no JSON-RPC message) through `errors`. Returns at EOF (or once rmcp stops reading),
/// closing rmcp's input.
async fn read_requests(mut input: impl AsyncBufRead + Unpin, rmcp: mpsc::Sender<ClientJsonRpcMessage>, errors: mpsc::UnboundedSender<String>, limit: usize) -> std::io::Result<()> {
    let mut line = Vec::new();
    // While skipping an oversized line: its head (for the id) and its length so far.
    let mut skipping: Option<(Vec<u8>, u64)> = None;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            // EOF: an unterminated last line is dropped (as rmcp's reader does).
            break;
        }
        let (part, ends) = match memchr::memchr(b'\n', chunk) {
            Some(at) => (&chunk[..at], true),
            None => (chunk, false),
        };
        let used = part.len() + usize::from(ends);
        if skipping.is_none() && line.len() + part.len() > limit {
            let seen = line.len() as u64;
            let mut head = std::mem::take(&mut line);
            head.truncate(limit::HEAD_BYTES);
            skipping = Some((head, seen));
        }
        match &mut skipping {
            Some((head, seen)) => {
                let room = limit::HEAD_BYTES.saturating_sub(head.len());
                head.extend_from_slice(&part[..room.min(part.len())]);
                *seen += part.len() as u64;
            }
            None => line.extend_from_slice(part),
        }
        input.consume(used);
        if !ends {
            continue;
        }
        match skipping.take() {
            Some((head, seen)) => {
                let bytes = seen;
                let id = limit::request_id(&head);
                tracing::warn!(bytes, limit, %id, "refused a request over the limit");
                let _ = errors.send(limit::over_limit(id, Some(bytes), limit).to_string());
            }
            None => {
                let decoded = if line.is_empty() { Decoded::Ignored } else { decode(&line) };
                match decoded {
                    Decoded::Message(message) => {
                        if rmcp.send(*message).await.is_err() {
                            break; // the session has ended
                        }
                    }
                    Decoded::Ignored => {}
                    Decoded::Invalid => {
                        let _ = errors.send(invalid_request());
                    }
                }
                // A whole session's line can be tens of MB: its buffer is not kept for the next.
                if line.capacity() > 4 * PIPE_BYTES {
                    line = Vec::new();
                } else {
                    line.clear();
                }
            }
        }
    }
    Ok(())
}

/// Copies rmcp's output to `out`, putting each refused request's error between complete lines;
/// returns once rmcp's output ends, after the errors still owed.
async fn write_responses(mut rmcp: impl AsyncRead + Unpin, mut errors: mpsc::UnboundedReceiver<String>, mut out: impl AsyncWrite + Unpin) -> std::io::Result<()> {
    let mut buffer = vec![0u8; PIPE_BYTES];
    let mut between_lines = true;
    loop {
        tokio::select! {
            biased;
            Some(error) = errors.recv(), if between_lines => {
                out.write_all(error.as_bytes()).await?;
                out.write_all(b"\n").await?;
                out.flush().await?;
            }
            read = rmcp.read(&mut buffer) => {
                let n = read?;
                if n == 0 {
                    break;
                }
                out.write_all(&buffer[..n]).await?;
                between_lines = buffer[n - 1] == b'\n';
                if between_lines {
                    out.flush().await?;
                }
            }
        }
    }
    if !between_lines {
        out.write_all(b"\n").await?;
    }
    while let Ok(error) = errors.try_recv() {
        out.write_all(error.as_bytes()).await?;
        out.write_all(b"\n").await?;
    }
    out.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rmcp's own reading of a line, as its stdio transport does it.
    fn rmcp_reads(line: &[u8]) -> Option<serde_json::Value> {
        let mut buffer = BytesMut::from(line);
        buffer.extend_from_slice(b"\n");
        let message = JsonRpcMessageCodec::<ClientJsonRpcMessage>::default().decode(&mut buffer).ok()??;
        Some(serde_json::to_value(message).unwrap())
    }

    fn ours(line: &[u8]) -> Option<serde_json::Value> {
        match decode(line) {
            Decoded::Message(message) => Some(serde_json::to_value(*message).unwrap()),
            Decoded::Ignored | Decoded::Invalid => None,
        }
    }

    #[test]
    fn every_line_reads_as_rmcp_reads_it() {
        // A session's text as a tool's argument: quotes, backslashes, escapes, astral characters.
        let session = "{\"type\":\"message\",\"text\":\"a \\\"quoted\\\" C:\\\\path\\n\\tand 🦀 é\"}\n".repeat(200);
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "compact", "arguments": {"conversation": "c", "transcript": session}}});
        let with_meta = serde_json::json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "compact", "arguments": {}, "_meta": {"progressToken": 3}}});
        let lines = [
            call.to_string(),
            format!("{call}\r"),
            format!("\u{feff}{call}"),
            with_meta.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plugins_list"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.into(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.into(),
            r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p","arguments":{}}}"#.into(),
        ];
        for line in &lines {
            let theirs = rmcp_reads(line.as_bytes());
            assert!(theirs.is_some(), "rmcp reads {line:.120}");
            assert_eq!(ours(line.as_bytes()), theirs, "{line:.120}");
        }
        // The argument arrives whole, and a call without `_meta` has none.
        let read = ours(lines[0].as_bytes()).unwrap();
        assert_eq!(read["params"]["arguments"]["transcript"], session);
        assert_eq!(read["params"]["_meta"], serde_json::Value::Null);
        assert_eq!(ours(lines[3].as_bytes()).unwrap()["params"]["_meta"]["progressToken"], 3);
    }

    #[test]
    fn garbage_is_ignored_and_json_that_is_no_message_is_an_invalid_request() {
        assert!(matches!(decode(b"not json at all"), Decoded::Ignored));
        assert!(matches!(decode(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"#), Decoded::Ignored));
        assert!(matches!(decode(br#"{"hello":"world"}"#), Decoded::Invalid));
        // A call whose params are not a tool call's is rmcp's to read (its custom-request
        // variant takes it, and it is answered as an unknown method).
        let odd = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#;
        assert_eq!(ours(odd), rmcp_reads(odd));
        let answer: serde_json::Value = serde_json::from_str(&invalid_request()).unwrap();
        assert_eq!(answer["error"]["code"], -32600);
        assert_eq!(answer["id"], serde_json::Value::Null);
    }
}
