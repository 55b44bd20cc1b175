//! protospread-inference: the statistical tests and intervals of protospread, as pure functions
//! of integers and floats (no I/O, no DataFusion). docs/statistics.md states every formula.
//!
//! - [`permutation_test`]: the exact permutation test of one cell (protocol scores against
//!   sampling scores, statistic = ratio of sample variances, compared as exact fractions).
//! - [`benjamini_hochberg`]: the step-up procedure on exact p-values.
//! - [`cluster_bootstrap`]: percentile intervals of a share and a median, resampling clusters
//!   (models) with [`SplitMix64`] from a fixed seed.
//! - [`kendall_tau_b`], [`ranking`]: agreement of model orders across setups.
//! - [`cochran_q`], [`mcnemar_exact`], [`chi_square_sf`]: paired tests of binary outcomes.

mod bh;
mod bootstrap;
mod frac;
mod gamma;
mod paired;
mod permutation;
mod ranking;

pub use bh::{benjamini_hochberg, BhResult, BH_Q};
pub use bootstrap::{
    cluster_bootstrap, percentile, BootstrapHeadline, BootstrapInterval, SplitMix64,
    BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED,
};
pub use frac::{gt as fraction_gt, Fraction};
pub use gamma::{chi_square_sf, ln_gamma};
pub use paired::{cochran_q, mcnemar_exact, CochranQ};
pub use permutation::{permutation_test, PermutationTest, MAX_SPLITS};
pub use ranking::{kendall_tau_b, median, ranking, Ranking};

/// Inputs a test cannot be computed from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InferenceError {
    /// A group has fewer values than the test needs.
    #[error("{what}: {got} values, at least {need} needed")]
    TooFew {
        /// Which input.
        what: &'static str,
        /// How many it has.
        got: usize,
        /// How many the test needs.
        need: usize,
    },
    /// The exact enumeration would exceed [`MAX_SPLITS`].
    #[error("{splits} splits exceed the limit of {MAX_SPLITS} for exact enumeration")]
    TooManySplits {
        /// C(n_p + n_s, n_s), or `u64::MAX` when it overflows.
        splits: u64,
    },
    /// Inputs whose lengths or values do not fit together.
    #[error("{0}")]
    Shape(String),
}
