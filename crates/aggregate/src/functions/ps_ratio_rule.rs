//! `ps_ratio_rule(n_p, sum_p, sumsq_p, n_s, sum_s, sumsq_s)`: how [`crate::ratio`] formed
//! the ratio, the name of its [`crate::RatioRule`].

use super::formula::{per_row, TWO_MOMENTS};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_ratio_rule", &TWO_MOMENTS, |r| {
        Some(crate::ratio(r.moments(0)?, r.moments(3)?)?.1.as_str())
    })
}
