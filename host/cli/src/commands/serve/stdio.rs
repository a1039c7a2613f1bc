//! `cairn serve` over stdio: newline-delimited JSON-RPC, with the request size limit rmcp's own
//! stdio transport lacks an answer for (it drops an oversized line and its caller waits
//! forever). rmcp runs over a pair of in-process pipes:
//! - stdin → `read_requests` → rmcp: a line within `--max-request-bytes` is passed on; a longer
//!   one is skipped to its newline in chunks (never held whole) and answered with a JSON-RPC
//!   error carrying the id found in its head;
//! - rmcp → `write_responses` → stdout: rmcp's output copied through, the errors put only
//!   between its complete lines, every complete line flushed.
//!
//! EOF on stdin ends rmcp's session, whose output then ends; everything written is flushed
//! before the server exits.

use anyhow::{Context, Result};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::ServiceExt;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::limit;
use super::tools::Server;

/// The in-process pipes' buffers.
const PIPE_BYTES: usize = 256 * 1024;

pub async fn serve(server: Server, max_request_bytes: usize) -> Result<()> {
    let (requests, rmcp_in) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_out, responses) = tokio::io::duplex(PIPE_BYTES);
    let (errors, refused) = mpsc::unbounded_channel();
    let reading = tokio::spawn(read_requests(BufReader::with_capacity(PIPE_BYTES, tokio::io::stdin()), requests, errors, max_request_bytes));
    let writing = tokio::spawn(write_responses(responses, refused, tokio::io::stdout()));
    // The reader lets no longer line through; rmcp's own (lower) limit would drop it silently.
    let transport = AsyncRwTransport::new_server(rmcp_in, rmcp_out).with_max_line_length(max_request_bytes.saturating_add(2));
    let running = server.serve(transport).await.context("starting the MCP session")?;
    running.waiting().await.context("serving MCP")?;
    writing.await.context("writing responses")?.context("writing to stdout")?;
    if reading.is_finished() {
        reading.await.context("reading requests")?.context("reading stdin")?;
    }
    Ok(())
}

/// Passes each line of `input` within `limit` bytes to `rmcp`; answers a longer one through
/// `errors`. Returns at EOF (or once rmcp stops reading), closing rmcp's input.
async fn read_requests(mut input: impl AsyncBufRead + Unpin, mut rmcp: impl AsyncWrite + Unpin, errors: mpsc::UnboundedSender<String>, limit: usize) -> std::io::Result<()> {
    let mut line = Vec::new();
    // While skipping an oversized line: its head (for the id) and its length so far.
    let mut skipping: Option<(Vec<u8>, u64)> = None;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            // EOF: an unterminated last line goes to rmcp as it is (which ignores it).
            if skipping.is_none() && !line.is_empty() {
                rmcp.write_all(&line).await?;
            }
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
                line.push(b'\n');
                rmcp.write_all(&line).await?;
                // A whole session's line can be tens of MB: its buffer is not kept for the next.
                if line.capacity() > 4 * PIPE_BYTES {
                    line = Vec::new();
                } else {
                    line.clear();
                }
            }
        }
    }
    rmcp.shutdown().await
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
