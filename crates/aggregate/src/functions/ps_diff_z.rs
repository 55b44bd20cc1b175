//! `ps_diff_z(d, human_sd)`: a difference of scores in human SDs, [`crate::diff_z`].

use super::formula::{per_row, F, I};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_diff_z", &[I, F], |r| {
        Some(crate::diff_z(r.int(0)?, r.float(1)?))
    })
}
