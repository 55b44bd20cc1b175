//! The generator of stored answers (a generator is not a stage: nothing in the pipeline calls
//! this crate; `protospread simulate` does).
//!
//! - The simulated study with planted effects ([`simulate()`], every record labelled
//!   "simulated", docs/simulation.md), its item map from the scoring key ([`item_map`]) and
//!   its files ([`write_simulation`]).

mod simulate;

pub use simulate::{
    item_map, simulate, write_simulation, ItemInfo, SimOutput, SIMULATED_ANSWERS_FILE,
    SIMULATED_LABEL, SIMULATED_TRUTH_FILE,
};

/// Errors of the generator; each names the file or test it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// A file-system error from `fs_err`, whose message names the path.
    #[error(transparent)]
    Fs(#[from] std::io::Error),
    /// The scoring key lacks what the simulation needs for a test.
    #[error("simulation item map, test {test}: {message}")]
    Key {
        /// The test.
        test: String,
        /// What is wrong, for the user.
        message: String,
    },
    /// Serializing a record or the truth to JSON failed.
    #[error("{what} serialization")]
    Json {
        /// What was serialized.
        what: &'static str,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// Writing the files (atomic writes of the shared layer).
    #[error(transparent)]
    Core(#[from] protospread_core::CoreError),
}
