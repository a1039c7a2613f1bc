//! Scenarios the scorecard names but Cairn cannot check yet; each says what it needs.

use super::{Scenario, Score};
use crate::commands::eval::Lab;

pub struct NotBuilt(pub &'static str, pub &'static str);

impl Scenario for NotBuilt {
    fn name(&self) -> &'static str {
        self.0
    }

    fn run(&self, _: &Lab) -> anyhow::Result<Score> {
        anyhow::bail!("not built yet: {}", self.1)
    }

    fn not_built(&self) -> Option<&'static str> {
        Some(self.1)
    }
}
