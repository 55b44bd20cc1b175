//! How far a long stage got, for the binary to show: the library crates never print.

/// Where a stage reports its progress: phases (an input's import, a source's scoring, the
/// aggregate tables), each a count of units (records, rows, tables) done. The binary draws
/// them on a terminal; everywhere else they are [`NoProgress`]. Calls come from the stage's
/// worker threads, so an implementation is shared between threads.
pub trait Progress: Send + Sync + std::fmt::Debug {
    /// A phase begins: `what` names it, `unit` names what it counts, `total` is the count at
    /// its end when known.
    fn begin(&self, what: &str, unit: &str, total: Option<u64>);
    /// `n` more units of the current phase are done.
    fn advance(&self, n: u64);
    /// The current phase ended.
    fn end(&self);
}

/// Progress that goes nowhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn begin(&self, _: &str, _: &str, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}
