//! A value built on a thread of its own from the moment it is started, so whoever does not
//! need it never waits: `cairn serve` answers `initialize` and `tools/list` at once while its
//! plugins compile (seconds from a cold code cache), and only the calls that run the engine
//! wait for them.

use std::sync::Arc;

use anyhow::Result;
use tokio::sync::watch;

/// The outcome of the build, shared by everyone who waits for it: the value, or the build's
/// error with its causes (which name the plugin or policy that failed).
type Outcome<T> = Option<Result<T, Arc<str>>>;

/// A value being prepared in the background. Cheap to clone; every clone sees the same build.
#[derive(Clone)]
pub struct Preparing<T> {
    outcome: watch::Receiver<Outcome<T>>,
}

impl<T: Clone + Send + Sync + 'static> Preparing<T> {
    /// Starts `build` on a thread named `name` and returns at once.
    pub fn start(name: &str, build: impl FnOnce() -> Result<T> + Send + 'static) -> std::io::Result<Self> {
        let (done, outcome) = watch::channel(None);
        std::thread::Builder::new().name(name.to_string()).spawn(move || {
            let built = build().map_err(|error| Arc::from(format!("{error:#}")));
            // Nobody waiting any more (every clone dropped) is fine.
            let _ = done.send(Some(built));
        })?;
        Ok(Preparing { outcome })
    }

    /// The value if the build has finished, without waiting: `None` while it runs.
    pub fn ready(&self) -> Option<Result<T, Arc<str>>> {
        self.outcome.borrow().clone()
    }

    /// The value, once built (at once if it is).
    pub async fn wait(&self) -> Result<T, Arc<str>> {
        let mut outcome = self.outcome.clone();
        let waited = match outcome.wait_for(Option::is_some).await {
            Ok(done) => done.clone().expect("waited for it"),
            // The sender is only dropped without a value when the build panicked.
            Err(_) => Err(Arc::from("the build stopped without a result (it panicked; the log says where)")),
        };
        waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[tokio::test]
    async fn a_waiter_gets_the_value_once_built_and_a_failure_names_its_cause() {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let preparing = Preparing::start("test-build", move || {
            released.recv().unwrap();
            Ok(7)
        })
        .unwrap();
        assert!(preparing.ready().is_none(), "not built before it is released");
        release.send(()).unwrap();
        assert_eq!(preparing.wait().await.unwrap(), 7);
        assert_eq!(preparing.ready().unwrap().unwrap(), 7);

        let failing = Preparing::<u32>::start("test-build", || Err(anyhow::anyhow!("not a valid Wasm component")).context("plugin `broken`")).unwrap();
        assert_eq!(&*failing.wait().await.unwrap_err(), "plugin `broken`: not a valid Wasm component");
    }

    #[tokio::test]
    async fn a_build_that_panics_is_an_error_not_a_hang() {
        let preparing = Preparing::<u32>::start("test-build", || panic!("boom")).unwrap();
        assert!(preparing.wait().await.unwrap_err().contains("panicked"));
    }
}
