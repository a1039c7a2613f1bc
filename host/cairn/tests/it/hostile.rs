//! A hostile corpus: strategy components written in WAT, each built to break the host in one
//! way the ABI allows — extra memories past the cap, a huge failure message, malformed
//! answers. Each must end as its outcome class, on time, with the host's memory bounded, and
//! the chain must go on to a committed outcome.

use crate::support;

use std::time::{Duration, Instant};

use cairn::record::{CompactionReport, OutcomeClass, MAX_MESSAGE_CHARS};
use cairn::storage::{ConversationKey, Home};
use cairn::transcript::sample;

/// A strategy component from a core module in WAT: the module exports `memory`,
/// `cabi_realloc` and `compact` (`(param i32) (result i32)`: the request and the answer are
/// passed by pointer), and the contract's type information is embedded as a toolchain would.
fn strategy(core_wat: &str) -> Vec<u8> {
    let mut module = wat::parse_str(core_wat).expect("valid WAT");
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve.push_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit/0.1.0")).unwrap();
    let world = resolve.select_world(&[package], Some("strategy")).unwrap();
    wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8, false).unwrap();
    wit_component::ComponentEncoder::default().module(&module).unwrap().validate(true).encode().unwrap()
}

/// A core module whose `compact` writes `answer` (a WAT instruction sequence) and returns the
/// pointer 0, with `extra` spliced in (memories, data).
fn module(extra: &str, answer: &str) -> String {
    format!(
        r#"(module
            (memory (export "memory") 1)
            {extra}
            (global $next (mut i32) (i32.const 1024))
            (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
                (local $at i32)
                (local.set $at (i32.and (i32.add (global.get $next) (i32.const 7)) (i32.const -8)))
                (global.set $next (i32.add (local.get $at) (local.get 3)))
                (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
                    (then (drop (memory.grow (i32.add (i32.div_u (local.get 3) (i32.const 65536)) (i32.const 1))))))
                (local.get $at))
            (func (export "compact") (param i32) (result i32)
                {answer}
                (i32.const 0)))"#
    )
}

/// `Err(strategy-error::failed(string at ptr, len))` at address 0.
fn failed(ptr: u32, len: u32) -> String {
    format!("(i32.store8 (i32.const 0) (i32.const 1)) (i32.store8 (i32.const 4) (i32.const 2)) (i32.store (i32.const 8) (i32.const {ptr})) (i32.store (i32.const 12) (i32.const {len}))")
}

const SHAKE: &str = "[[chain]]\nplugin = \"shake-elide\"\ngrants = [\"log\", \"tokens\", \"archive:write\"]\n";

fn run(component: &[u8], timeout_ms: u64) -> (CompactionReport, Duration) {
    let mut cairn = support::host();
    let manifest = "name = \"hostile\"\nkind = \"strategy\"\nversion = \"0.1.0\"\n";
    cairn.add_plugin(manifest, component, "hostile.wasm").unwrap_or_else(|e| panic!("{e:#}"));
    let policy = support::policy(&cairn, &format!("[[chain]]\nplugin = \"hostile\"\nmemory_mib = 128\ntimeout_ms = {timeout_ms}\n{SHAKE}"));
    let dir = tempfile::tempdir().unwrap();
    let home = Home::open(dir.path()).unwrap();
    let mut store = home.conversation(&ConversationKey::parse("hostile").unwrap()).unwrap();
    let started = Instant::now();
    let report = cairn.compact(&policy, &mut store, &sample::coding_session(8), "hostile").unwrap();
    let took = started.elapsed();
    // For the record of what each attack costs (`cargo test -p cairn --test it hostile -- --nocapture`).
    eprintln!("measured: {:?} in {} ms (step), peak RSS {} MiB", report.steps[0].outcome, report.steps[0].millis, peak_rss_mib());
    assert!(report.steps[1].plugin.starts_with("shake-elide@") && report.steps[1].outcome == OutcomeClass::Ok, "the chain goes on: {:#?}", report.steps);
    assert!(peak_rss_mib() < 1_024, "the host's peak memory stays bounded: {} MiB", peak_rss_mib());
    (report, took)
}

/// The process's peak resident memory (Linux `VmHWM`).
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()).map_or(0, |kb| kb / 1024)
}

#[test]
fn extra_memories_count_toward_one_cap_and_end_as_oom() {
    // Three extra memories of 48 MiB: each under the 128 MiB cap, together over it.
    let extra = "(memory $a 768) (memory $b 768) (memory $c 768)";
    let (report, took) = run(&strategy(&module(extra, &failed(0, 0))), 2_000);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Oom, "{:#?}", report.steps[0]);
    assert!(took < Duration::from_secs(20));

    // Eight tiny extra memories: over the limit on how many a plugin may have.
    let many: String = (0..8).map(|i| format!("(memory $m{i} 1) ")).collect();
    let (report, _) = run(&strategy(&module(&many, &failed(0, 0))), 2_000);
    assert_eq!(report.steps[0].outcome, OutcomeClass::Oom, "{:#?}", report.steps[0]);
}

#[test]
fn a_huge_failure_message_is_clipped_before_the_record() {
    // A 96 MiB message of zero bytes (valid UTF-8) in fresh pages, above where the request was
    // copied in.
    let len = 96u32 << 20;
    let answer = format!("(drop (memory.grow (i32.const 1700))) {}", failed(4 << 20, len));
    let (report, took) = run(&strategy(&module("", &answer)), 10_000);
    let step = &report.steps[0];
    assert_eq!(step.outcome, OutcomeClass::Invalid, "{:?}", step.message.as_deref().map(|m| &m[..m.len().min(300)]));
    let message = step.message.as_deref().unwrap();
    assert!(message.len() < MAX_MESSAGE_CHARS + 200, "{} bytes reached the record", message.len());
    assert!(message.contains(&format!("({} bytes in all)", len)), "the clip says how long it was");
    assert!(took < Duration::from_secs(30));
}

#[test]
fn malformed_answers_are_traps_not_crashes() {
    for (what, answer) in [
        ("a result discriminant out of range", "(i32.store8 (i32.const 0) (i32.const 7))".to_string()),
        ("an error case out of range", "(i32.store8 (i32.const 0) (i32.const 1)) (i32.store8 (i32.const 4) (i32.const 9))".to_string()),
        ("a string past the end of memory", failed(60_000, 1 << 20)),
        ("a string that is not UTF-8", format!("(i32.store (i32.const 100) (i32.const 0xfffefdfc)) {}", failed(100, 4))),
    ] {
        let (report, took) = run(&strategy(&module("", &answer)), 2_000);
        assert_eq!(report.steps[0].outcome, OutcomeClass::Trap, "{what}: {:#?}", report.steps[0]);
        assert!(took < Duration::from_secs(20), "{what}");
    }
}

#[test]
fn an_endless_loop_in_wat_ends_at_its_timeout_plus_a_small_margin() {
    let (report, _) = run(&strategy(&module("", "(loop $forever (br $forever))")), 300);
    let step = &report.steps[0];
    assert_eq!(step.outcome, OutcomeClass::Timeout);
    assert!(step.millis < 300 + 200, "{} ms against a 300 ms timeout", step.millis);
}
