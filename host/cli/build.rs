// The test-only cfgs (`no_npm`, `no_shared_transcripts`, …) of the library's build script: one
// definition for both crates, and a build script inside this package (an sdist packs only packages).
include!("../cairn/build.rs");
