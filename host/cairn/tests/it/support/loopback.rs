//! A loopback HTTP/1.1 server for model tests: each request is recorded (per server, so a test
//! can tell which server got which request) and answered by a closure, which may also stall
//! to simulate a slow model or send extra headers such as a redirect's `Location`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub struct Reply {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
    /// Sent after `content-type`, `content-length` and `connection`.
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn ok(body: impl Into<String>) -> Self {
        Reply::status(200, body)
    }

    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply { status, body: body.into(), delay: Duration::ZERO, headers: Vec::new() }
    }

    /// `body` after `delay`.
    pub fn slow(body: impl Into<String>, delay: Duration) -> Self {
        Reply { delay, ..Reply::ok(body) }
    }

    /// A redirect (`status` is 301, 302, 303, 307 or 308) to `location`.
    pub fn redirect(status: u16, location: impl Into<String>) -> Self {
        Reply { headers: vec![("location".into(), location.into())], ..Reply::status(status, "") }
    }
}

pub struct Loopback {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl Loopback {
    pub fn start(answer: impl Fn(usize, &Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (seen, answer) = (seen.clone(), answer.clone());
                std::thread::spawn(move || serve(stream, &seen, answer.as_ref()));
            }
        });
        Loopback { base_url, requests }
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

fn serve(stream: TcpStream, seen: &Mutex<Vec<Request>>, answer: &(dyn Fn(usize, &Request) -> Reply + Send + Sync)) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let length: usize = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-length")).and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let request = Request { path, headers, body: String::from_utf8_lossy(&body).into_owned() };
    let n = {
        let mut seen = seen.lock().unwrap();
        seen.push(request.clone());
        seen.len() - 1
    };
    let reply = answer(n, &request);
    std::thread::sleep(reply.delay);
    let mut head = format!("HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n", reply.status, reply.body.len());
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(reply.body.as_bytes()));
}

/// An OpenAI chat completion carrying `text`.
pub fn openai_reply(text: &str) -> String {
    serde_json::json!({ "id": "x", "object": "chat.completion", "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }] }).to_string()
}

/// An Anthropic message carrying `text` in two blocks.
pub fn anthropic_reply(text: &str) -> String {
    let (a, b) = text.split_at(text.len() / 2);
    serde_json::json!({ "id": "x", "type": "message", "role": "assistant", "content": [{ "type": "text", "text": a }, { "type": "text", "text": b }], "stop_reason": "end_turn" }).to_string()
}

/// A port nothing listens on.
pub fn refused_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}
