//! The Node.js package as a user meets it: the addon `.ci/run` builds from `host/node` with
//! `napi build` (@napi-rs/cli, pinned in host/node/package.json; debug profile, the same target
//! directory as these tests), packed with `npm pack` into the main package and the Linux x86-64
//! platform package, both installed into a fresh project with nothing else from the tree; the
//! package's own tests (`host/node/tests`) run there — the `cairn` bin through `npx` included —
//! and its types are checked by TypeScript (`tsc --strict`, pinned). The Vercel AI SDK integration
//! runs in a real `generateText` loop (`ai`, pinned) there too, and the OpenAI Agents SDK's in a
//! real `run` (`@openai/agents`, pinned), and LangGraph.js's in a real `createReactAgent`. A
//! TypeScript harness (`recorded_session.ts`) is compiled by tsc and run: it compacts a recorded Pi
//! session through the package.

use std::path::Path;
use std::process::Command;

use crate::support::node_packages::{self, run};

const TYPESCRIPT: &str = "typescript@6.0.3";
/// The types the AI SDK's declarations name (Node's, JSON Schema's), as a harness has them.
const TYPES: [&str; 2] = ["@types/node@20.19.43", "@types/json-schema@7.0.15"];
/// The frameworks the integrations are tested against (`cairn-compaction/ai-sdk`,
/// `cairn-compaction/openai-agents`, `cairn-compaction/langgraph`), and the zod they take as a
/// peer.
const FRAMEWORKS: [&str; 5] = ["ai@7.0.185", "@openai/agents@0.20.0", "@langchain/langgraph@1.7.3", "@langchain/core@1.4.0", "zod@4.6.7"];
/// The package's own tests, and the integrations'.
const TESTS: [&str; 4] = ["host.test.mjs", "ai-sdk.test.mjs", "openai-agents.test.mjs", "langgraph.test.mjs"];

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn the_node_packages_install_alone_and_their_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let Some(node_packages::Packed { main, native }) = node_packages::packed(dir.path()) else { return };
    let listed = run(Command::new("tar").arg("-tzf").arg(&main));
    assert!(!listed.contains(".node"), "the main package carries no addon (the platform packages do):\n{listed}");

    // A fresh project: the two tarballs, and TypeScript for the type check.
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("package.json"), r#"{"name":"a-harness","version":"1.0.0","private":true,"type":"module"}"#).unwrap();
    run(Command::new("npm").args(["install", "--no-audit", "--no-fund", "--loglevel=error", TYPESCRIPT]).args(FRAMEWORKS).args(TYPES).arg(&main).arg(&native).current_dir(&project));
    for test in TESTS.iter().chain(&["typed_use.ts", "recorded_session.ts"]) {
        std::fs::copy(root.join("host/node/tests").join(test), project.join(test)).unwrap();
    }
    // The adapters' tests compact under this policy, so that Cairn's checkpoint is in a request.
    std::fs::copy(root.join("examples/policies/offline-deep.toml"), project.join("offline-deep.toml")).unwrap();
    let report = run(Command::new("node").args(["--test", "--test-reporter=spec"]).args(TESTS).current_dir(&project));
    eprintln!("{report}");
    assert!(report.contains("pass 11") && report.contains("fail 0"), "every test of {TESTS:?} ran and passed:\n{report}");
    run(Command::new("npx").args(["--no-install", "tsc", "--strict", "--noEmit", "--module", "nodenext", "--target", "es2022", "--types", "node", "typed_use.ts"]).current_dir(&project));
    // A TypeScript harness, compiled and run: it compacts a recorded Pi session.
    run(Command::new("npx").args(["--no-install", "tsc", "--strict", "--module", "nodenext", "--target", "es2022", "--types", "node", "--outDir", "out", "recorded_session.ts"]).current_dir(&project));
    let session = crate::support::shared("pi").join("pi-mono__before-compaction.jsonl");
    let compacted: serde_json::Value = serde_json::from_str(&run(Command::new("node").arg("out/recorded_session.js").arg(&session).current_dir(&project))).unwrap();
    let (before, after) = (compacted["tokens_before"].as_u64().unwrap(), compacted["tokens_after"].as_u64().unwrap());
    assert!(after * 2 < before && compacted["archive_id"].as_str().is_some_and(|a| a.starts_with("a-")), "{compacted}");
    let archive = compacted["archive_id"].as_str().unwrap();
    assert!(compacted["history"].as_str().is_some_and(|h| h.contains(archive)), "session_history's summary names the archive: {compacted}");
    // The package's own types, as a harness's compiler reads them.
    run(Command::new("npx")
        .args(["--no-install", "tsc", "--strict", "--noEmit", "--module", "nodenext", "--target", "es2022", "--types", "node"])
        .arg("node_modules/cairn-compaction/index.d.ts")
        .arg("node_modules/cairn-compaction/native.d.ts")
        .arg("node_modules/cairn-compaction/integrations/ai-sdk.d.mts")
        .arg("node_modules/cairn-compaction/integrations/openai-agents.d.mts")
        .arg("node_modules/cairn-compaction/integrations/langgraph.d.mts")
        .current_dir(&project));
}
