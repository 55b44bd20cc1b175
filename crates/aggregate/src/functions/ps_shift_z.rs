//! `ps_shift_z(n_to, sum_to, n_from, sum_from, human_sd)`: the protocol shift in human SDs,
//! [`crate::shift_z`].

use super::formula::{per_row, F, I};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_shift_z", &[I, I, I, I, F], |r| {
        crate::shift_z(r.int(0)?, r.int(1)?, r.int(2)?, r.int(3)?, r.float(4)?)
    })
}
