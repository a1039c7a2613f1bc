//! Crash injection for tests, compiled only with the `fault-injection` feature: with
//! `CAIRN_FAULT=<point>` set, the process kills itself with SIGKILL when it reaches that
//! point, exactly as a crash or an OOM killer would. Without the feature it is a no-op.

/// Dies here if `CAIRN_FAULT` names this point.
#[cfg(feature = "fault-injection")]
pub fn point(name: &str) {
    if std::env::var("CAIRN_FAULT").is_ok_and(|f| f == name) {
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        std::process::abort();
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_name: &str) {}
