//! The policy parser: any text gets a policy or an error naming the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = cairn::Policy::parse(&text, "fuzz.toml") {
        assert!(e.to_string().starts_with("fuzz.toml"), "{e}");
    }
});
