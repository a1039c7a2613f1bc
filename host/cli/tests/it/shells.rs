//! The MCP server is a shell over the library's harness API: its tools map names and schemas
//! onto `cairn::harness`, and no transcript format is parsed, rendered or listed in it. Read
//! as source, so a format added to the library's registry reaches every shell without an edit
//! here (and a copy of format logic in the server fails this test, naming the line).

use std::path::Path;

/// What only the library's format registry and readers may say.
const FORMAT_LOGIC: &[&str] = &[
    "formats::",
    "Format::",
    "parse_as",
    "write_cairn",
    "write_openai",
    "write_anthropic",
    "write_pi",
    "render_prefix",
    "\"claude-code\"",
    "\"openai\"",
    "\"anthropic\"",
    "\"gemini\"",
    "\"codex\"",
    "\"opencode\"",
];

#[test]
fn the_mcp_server_holds_no_transcript_format_logic() {
    let serve = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands/serve");
    let mut found = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&serve).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        for (n, line) in std::fs::read_to_string(&path).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(word) = FORMAT_LOGIC.iter().find(|w| code.contains(**w)) {
                found.push(format!("{}:{}: {word}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(files >= 5, "the server's sources were not found in {}", serve.display());
    assert!(found.is_empty(), "format logic in the MCP server (it belongs in cairn::transcript::formats or cairn::harness):\n{}", found.join("\n"));
}
