//! `ps_variance_gt(n_p, sum_p, sumsq_p, n_s, sum_s, sumsq_s)`: whether the protocol variance
//! exceeds the sampling variance, exactly, [`crate::variance_gt`].

use super::formula::{per_row, TWO_MOMENTS};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_variance_gt", &TWO_MOMENTS, |r| {
        crate::variance_gt(r.moments(0)?, r.moments(3)?)
    })
}
