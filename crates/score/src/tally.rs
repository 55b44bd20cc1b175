//! The administration's tallies: the aggregate functions `strict_administration`,
//! `lenient_administration` and `request_counts` ([`crate::functions`]) score each request's
//! readings ([`crate::kernels`]) and sum them per group where they are read.

// The score plans register the tallies through here.
pub(crate) use crate::functions::udafs;
