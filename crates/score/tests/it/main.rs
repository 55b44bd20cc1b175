//! The score crate's integration tests, in one test binary (one link of the dependency tree):
//! parity on the embedded human data through the library, and property tests of the scorer.

mod parity_data;
mod scorer_props;
