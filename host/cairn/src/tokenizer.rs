//! Token counting with OpenAI's `o200k_base` BPE (tiktoken-rs): a real tokenizer whose ranks
//! ship inside the crate, so counts are exact for GPT-4o-class models and a close, offline
//! estimate for others — no model server, no download.

use tiktoken_rs::CoreBPE;

use crate::transcript::Transcript;

/// Cheap to copy; the BPE tables are loaded once per process.
#[derive(Clone, Copy)]
pub struct Tokenizer {
    bpe: &'static CoreBPE,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer { bpe: tiktoken_rs::o200k_base_singleton() }
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokenizer(o200k_base)")
    }
}

/// Per-message framing the chat formats add around each entry.
const ENTRY_OVERHEAD: u32 = 4;

impl Tokenizer {
    pub fn count(&self, text: &str) -> u32 {
        self.bpe.encode_ordinary(text).len() as u32
    }

    /// Fills in every entry's `tokens`.
    pub fn count_transcript(&self, transcript: &mut Transcript) {
        for entry in &mut transcript.entries {
            self.count_entry(entry);
        }
    }

    pub fn count_entry(&self, entry: &mut crate::transcript::Entry) {
        entry.tokens = self.count(&entry.model_text()) + ENTRY_OVERHEAD;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_tokens_not_characters() {
        let t = Tokenizer::default();
        assert_eq!(t.count(""), 0);
        assert_eq!(t.count("hello world"), 2);
        // A long repeated word compresses far below chars/4.
        assert!(t.count(&"token ".repeat(1000)) <= 1001);
    }
}
