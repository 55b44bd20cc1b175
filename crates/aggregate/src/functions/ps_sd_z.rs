//! `ps_sd_z(n, sum, sumsq, human_sd)`: the sample SD of the moments in human SDs,
//! [`crate::sd_z`].

use super::formula::{per_row, F, I};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_sd_z", &[I, I, I, F], |r| {
        crate::sd_z(r.moments(0)?, r.float(3)?)
    })
}
