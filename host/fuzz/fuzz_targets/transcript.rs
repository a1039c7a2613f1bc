//! Every transcript reader (auto-detected), then what it read written back out in each format
//! and read again, and counted: no input may panic the host.
#![no_main]

use cairn::transcript::formats;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok((mut transcript, _)) = formats::parse(&text, "fuzz") {
        for written in [formats::write_cairn(&transcript), formats::write_openai(&transcript)] {
            formats::parse(&written, "fuzz-written").expect("what Cairn writes, Cairn reads");
        }
        cairn::tokenizer::Tokenizer::default().count_transcript(&mut transcript);
    }
});
