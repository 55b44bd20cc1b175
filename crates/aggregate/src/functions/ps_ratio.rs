//! `ps_ratio(n_p, sum_p, sumsq_p, n_s, sum_s, sumsq_s)`: protocol SD / sampling SD from the
//! two sides' moments, [`crate::ratio`].

use super::formula::{per_row, TWO_MOMENTS};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_ratio", &TWO_MOMENTS, |r| {
        crate::ratio(r.moments(0)?, r.moments(3)?)?.0
    })
}
