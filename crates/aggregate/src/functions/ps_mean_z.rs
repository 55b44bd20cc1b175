//! `ps_mean_z(n, sum, human_mean, human_sd)`: the mean in human SDs, [`crate::mean_z`].

use super::formula::{per_row, F, I};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_mean_z", &[I, I, F, F], |r| {
        crate::mean_z(r.int(0)?, r.int(1)?, r.float(2)?, r.float(3)?)
    })
}
