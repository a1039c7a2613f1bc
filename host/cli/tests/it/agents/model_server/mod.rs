//! One scripted model server on 127.0.0.1 for every agent of the conformance suite. It logs
//! every request (so a test asserts on what the agent sent the model), and answers through a
//! script in the wire format the agent speaks: one module per provider API
//! (`anthropic.rs`: Messages with SSE; `openai_chat.rs`: chat completions with SSE;
//! `openai_responses.rs`: the Responses API with SSE; `gemini.rs`: Gemini's generateContent).
//! HTTP/1.1, one request per connection (`connection: close`): every agent's client reconnects.

#![allow(dead_code)]

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request the agent sent.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Value::Null` when it was not JSON).
    pub body: Value,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// What the server sends back.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Reply { status, content_type: "application/json", body: body.to_string() }
    }

    /// Server-sent events: `(event name or "", data)` pairs.
    pub fn sse<'a>(events: impl IntoIterator<Item = (&'a str, Value)>) -> Self {
        let mut body = String::new();
        for (name, data) in events {
            if !name.is_empty() {
                body.push_str(&format!("event: {name}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Reply { status: 200, content_type: "text/event-stream", body }
    }

    pub fn not_found() -> Self {
        Reply::json(404, serde_json::json!({"error": {"type": "not_found_error", "message": "not scripted"}}))
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

/// The running server: its base URL and every request it got, in order.
pub struct ModelServer {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl ModelServer {
    /// Serves `script` on an ephemeral loopback port until the test ends.
    pub fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (seen, script): (_, Arc<Script>) = (requests.clone(), Arc::new(script));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (seen, script) = (seen.clone(), script.clone());
                std::thread::spawn(move || {
                    if let Some(request) = read_request(&stream) {
                        seen.lock().unwrap().push(request.clone());
                        write_reply(stream, &script(&request));
                    }
                });
            }
        });
        ModelServer { base_url, requests }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let mut words = line.split_whitespace();
    let (method, path) = (words.next()?.to_string(), words.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let get = |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v): &(String, String)| v.clone());
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Request { method, path, headers, body })
}

fn write_reply(mut stream: TcpStream, reply: &Reply) {
    let head = format!("HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n", reply.status, reply.content_type, reply.body.len());
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(reply.body.as_bytes()));
}
