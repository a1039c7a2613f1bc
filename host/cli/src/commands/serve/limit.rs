//! The request size limit both transports enforce (`--max-request-bytes`): a request over it is
//! answered with a JSON-RPC error naming the limit and the two ways out, with the request's id
//! as read from the head of its bytes (the rest is never buffered).

use serde_json::{json, Value};

/// How much of an oversized request is kept to find its id.
pub const HEAD_BYTES: usize = 8 * 1024;

/// JSON-RPC's "Invalid Request".
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Parse error".
pub const PARSE_ERROR: i64 = -32700;

/// The JSON-RPC error answering a body that is not a request (its id unknown: null).
pub fn malformed(code: i64, message: String) -> Value {
    json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } })
}

/// Whether `value` is a JSON-RPC 2.0 message: a request or notification (a method), or a
/// response (a result or an error); a batch when every member is one.
pub fn is_message(value: &Value) -> bool {
    match value {
        Value::Array(batch) => !batch.is_empty() && batch.iter().all(is_message),
        Value::Object(o) => o.get("jsonrpc") == Some(&json!("2.0")) && (o.get("method").is_some_and(Value::is_string) || o.contains_key("result") || o.contains_key("error")),
        _ => false,
    }
}

/// The JSON-RPC error answering a request of `bytes` bytes (None: unknown, only that it is
/// over) whose id is `id` (null when none was found).
pub fn over_limit(id: Value, bytes: Option<u64>, limit: usize) -> Value {
    let size = match bytes {
        Some(n) => format!("request of {n} bytes"),
        None => format!("request of more than {limit} bytes"),
    };
    let message = format!(
        "{size} is over this server's limit of {limit} bytes (--max-request-bytes): send only what is new (boundary with `since`), \
         or pass a `path` to the transcript file instead of its text (harness tools, stdio only)"
    );
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": INVALID_REQUEST, "message": message } })
}

/// The id of the JSON-RPC request whose first bytes are `head`: the value of the top-level
/// `"id"` member, when it is a string or a number and lies within `head`; else null.
pub fn request_id(head: &[u8]) -> Value {
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let Some(end) = string_end(head, i + 1) else { return Value::Null };
                let key = &head[i + 1..end];
                i = end + 1;
                if depth == 1 && key == b"id" {
                    let rest = skip_space(head, i);
                    if head.get(rest) == Some(&b':') {
                        let at = skip_space(head, rest + 1);
                        let value = serde_json::Deserializer::from_slice(&head[at..]).into_iter::<Value>().next();
                        return match value {
                            Some(Ok(id)) if id.is_string() || id.is_number() => id,
                            _ => Value::Null,
                        };
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Value::Null
}

/// The index of the quote closing the string that starts at `from` (after its opening quote).
fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    while from < bytes.len() {
        match bytes[from] {
            b'\\' => from += 2,
            b'"' => return Some(from),
            _ => from += 1,
        }
    }
    None
}

fn skip_space(bytes: &[u8], mut from: usize) -> usize {
    while bytes.get(from).is_some_and(|b| b.is_ascii_whitespace()) {
        from += 1;
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_id_is_found_in_a_head_whatever_comes_before_it() {
        assert_eq!(request_id(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"argu"#), json!(7));
        assert_eq!(request_id(br#"{"params":{"id":"inner","x":"\"id\":3"}, "id" : "outer", "method""#), json!("outer"));
        assert_eq!(request_id(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"transcript":"aaaa"#), Value::Null);
        assert_eq!(request_id(br#"{"id":{"no":1}}"#), Value::Null);
        assert_eq!(request_id(b"not json at all"), Value::Null);
    }
}
