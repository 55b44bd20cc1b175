//! `ps_z(x, human_mean, human_sd)`: a score in human SDs, [`crate::z`].

use super::formula::{per_row, F, I};
use datafusion::logical_expr::ScalarUDF;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    per_row("ps_z", &[I, F, F], |r| {
        Some(crate::z(r.int(0)?, r.float(1)?, r.float(2)?))
    })
}
