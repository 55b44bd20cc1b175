//! The stage's custom DataFusion functions, one a file, so the plans in `plan` call them by
//! name.
//!
//! - The formulas of [`crate::stats`] (`ps_sd_z`, `ps_mean_z`, `ps_z`, `ps_diff_z`,
//!   `ps_shift_z`, `ps_ratio`, `ps_ratio_rule`, `ps_variance_gt`), and `admins_in_order` and
//!   `text_in`, which the reasons and the cells without scores need.
//! - The inference tables' functions: `ps_ints` gathers a cell's scores, and the tests of
//!   `protospread_inference` (`ps_cell`, `ps_bh`) run over the lists a grouping gathers (one
//!   cell's or one group's rows), so the tables are plans like the others and no row becomes
//!   a Rust struct. The bootstrap of a source's cells and the rankings of a scale's models
//!   (`ps_headline`, `ps_ranking`) take lists too, but of groups too large to hold all at
//!   once: `crate::groups` runs them over a sorted plan, one group at a time. Each sorts what
//!   it reads before using it, so its result does not depend on the order the rows came in
//!   (that order varies with the partitioning). docs/statistics.md ("Inference") states the
//!   statistics.

mod admins_in_order;
mod formula;
mod lists;
mod ps_bh;
mod ps_cell;
mod ps_diff_z;
mod ps_headline;
mod ps_ints;
mod ps_mean_z;
mod ps_ranking;
mod ps_ratio;
mod ps_ratio_rule;
mod ps_sd_z;
mod ps_shift_z;
mod ps_variance_gt;
mod ps_z;
mod text_in;

use datafusion::prelude::SessionContext;

pub(crate) use ps_cell::{udf as cell_udf, SETUP_PACK};
pub(crate) use ps_headline::HEADLINE;
pub(crate) use ps_ranking::RANKING_OF;

/// Register every function that does not depend on the study (`ps_cell` does: [`cell_udf`]).
pub(crate) fn register(ctx: &SessionContext) {
    for f in [
        ps_sd_z::udf(),
        ps_mean_z::udf(),
        ps_z::udf(),
        ps_diff_z::udf(),
        ps_shift_z::udf(),
        ps_ratio::udf(),
        ps_ratio_rule::udf(),
        ps_variance_gt::udf(),
        admins_in_order::udf(),
        text_in::udf(),
        ps_bh::udf(),
    ] {
        ctx.register_udf(f);
    }
    ctx.register_udaf(ps_ints::udaf());
}
