//! The stage's tables as DataFusion SQL plans over the registered inputs (`scores`, `answers`,
//! `norms`), the `headline` table (source -> the arm its verdict uses, built by `stage` from
//! the rule in docs/statistics.md) and the scalar functions of `stats`.
//!
//! Only integers are summed; every float comes from a `ps_*` function applied to one cell's or
//! one group's integers, or from an order-independent built-in (`median`, `min`, `max`: the
//! result depends on the multiset of values only). Every result is sorted by a unique key, so
//! the bytes do not depend on the partition count.

use crate::functions::{HEADLINE, RANKING_OF};
use crate::groups::GroupFunction;
use protospread_core::AggregateSection as Params;
use protospread_core::{
    TableContract, BY_TEST, CELLS, CELLS_BY_RULE, CONSTANT_RUNS, PROTOCOL_VS_SAMPLING,
    PROTOCOL_VS_SAMPLING_BY_RULE, RANGE, REQUESTS, RERUNS, SEPARATE_ARMS, VERDICT, VERDICT_BY_RULE,
};
pub(crate) use protospread_engine::{Binds, Sql};

/// A float literal that parses back to the same double (`{:?}` of a float is digits, a
/// sign, `.`, `e`, `inf` or `NaN`: nothing to quote).
fn flit(x: f64) -> String {
    format!("CAST('{x:?}' AS DOUBLE)")
}

/// One combination of scale scores and protocol set that the per-cell views compute cells of.
pub(crate) struct Branch {
    /// Its number in the `combo` column of a [`Cut`] of several branches (and in their order).
    pub(crate) combo: usize,
    /// Whether its scale scores are the rows of `rule` in `scores_by_rule`; else they are
    /// `scores` (the strict rule's own).
    pub(crate) by_rule: bool,
    /// The reply rule and protocol set the rows are labelled with in the side-by-side tables.
    pub(crate) rule: String,
    pub(crate) set: &'static str,
    /// The protocol conditions (the sampling conditions are the study's).
    pub(crate) protocol: Vec<String>,
}

/// What one set of per-cell views is computed over: one [`Branch`], or several in one plan (the
/// side-by-side combinations), each per-cell row then keyed by its branch's `combo` first.
/// Planning, not execution, is most of the stage's time on small studies, so the combinations
/// share one set of plans instead of each planning its own.
pub(crate) struct Cut {
    pub(crate) branches: Vec<Branch>,
}

impl Cut {
    fn keyed(&self) -> bool {
        self.branches.len() > 1
    }

    /// The `combo` key column before the other keys (`a.combo, ` with an alias), or nothing.
    fn k(&self, alias: &str) -> String {
        match (self.keyed(), alias) {
            (false, _) => String::new(),
            (true, "") => "combo, ".to_string(),
            (true, a) => format!("{a}.combo, "),
        }
    }

    /// A join's condition on the `combo` key of `a` and `b`, or nothing.
    fn on(&self, a: &str, b: &str) -> String {
        if self.keyed() {
            format!("{a}.combo = {b}.combo AND ")
        } else {
            String::new()
        }
    }

    /// `expr(branch)` for the row's branch: the expression itself for one branch, else a CASE
    /// on `combo` (of alias `a`).
    fn per_branch(&self, a: &str, expr: impl Fn(&Branch) -> String) -> String {
        if !self.keyed() {
            return expr(&self.branches[0]);
        }
        let c = if a.is_empty() {
            "combo".to_string()
        } else {
            format!("{a}.combo")
        };
        let arms: String = self
            .branches
            .iter()
            .map(|b| format!("WHEN {} THEN {} ", b.combo, expr(b)))
            .collect();
        format!("CASE {c} {arms}END")
    }

    /// The expressions of the columns `rule` and `protocol_set` of the row's branch (alias
    /// `a`), for a contract's projection; their names are bound in `q`.
    pub(crate) fn rule_set(&self, a: &str, q: &Binds) -> [(&'static str, String); 2] {
        [
            ("rule", self.per_branch(a, |b| q.bind(&b.rule))),
            ("protocol_set", self.per_branch(a, |b| q.bind(b.set))),
        ]
    }

    /// The key `cells` is sorted by: (column, nulls first), ascending.
    pub(crate) fn cell_key(&self) -> Vec<(&'static str, bool)> {
        let mut key = Vec::with_capacity(5);
        if self.keyed() {
            key.push(("combo", false));
        }
        key.extend(["source", "model", "test", "dimension"].map(|c| (c, false)));
        key
    }
}

/// The conditions whose administrations a branch uses: its protocol set, then the sampling set.
fn used<'a>(p: &'a Params, b: &'a Branch) -> Vec<&'a String> {
    b.protocol.iter().chain(&p.sampling_conditions).collect()
}

/// Packing of a rerun pair's lowest sample and its score into one integer (see `views`).
const RERUN_PACK: i64 = 1024;
/// The packed score of an administration without a score in human SDs.
const RERUN_NONE: i64 = 1023;

/// Views that the tables are built from, in creation order: (name, SQL). Over a keyed
/// [`Cut`], `sc` is the union of its branches and every view carries `combo`. With `tests`,
/// `cm` also carries each cell's score lists for the inference tables (see [`cm_view`]).
pub(crate) fn views(p: &Params, cut: &Cut, tests: bool) -> Vec<(&'static str, Sql)> {
    // A branch's conditions (protocol, then sampling) are flagged `h_0..` in `sc`, so that
    // `cm` counts each by its position, whichever branch the row is of.
    let width = cut
        .branches
        .iter()
        .map(|b| used(p, b).len())
        .max()
        .unwrap_or(0);
    let k = cut.k("");
    let sc = sc_view(p, cut, width);
    // The tests run over the study's own cut, one branch: its protocol conditions are the
    // setups `ps_cell` is registered with (`Run::cells`).
    debug_assert!(!tests || !cut.keyed());
    let setups = tests.then(|| cut.branches[0].protocol.as_slice());
    let cm = cm_view(p, &k, width, setups);
    // The universe: every model of a source x every scale seen in the source.
    let models = format!(
        "SELECT {k}source, model, MIN(label) AS label, MIN(study) AS study, MIN(arm) AS arm, \
           MIN(cohort) AS cohort FROM sc GROUP BY {k}source, model"
    );
    // The scales seen, from `cm`, which groups every scale score by (source, model, test,
    // dimension) with no filter, so it has exactly the keys of the scores in a row per cell
    // (at 10^8 answers DISTINCTs over the scores were most of the `cells` plan). A row per
    // scale of each source, held: the small side of the joins that make the universe.
    let scales = format!("SELECT DISTINCT {k}source, test, dimension FROM cm");
    let (cell, reasons) = cell_views(p, cut, width, tests);
    vec![
        ("sc", sc),
        ("cm", cm),
        ("models", models.into()),
        ("scales", scales.into()),
        ("cell_parts", cell.into()),
        ("reasons", reasons),
    ]
}

/// `sc`: one row per scale score of every branch, with the flags the other views group by.
fn sc_view(p: &Params, cut: &Cut, width: usize) -> Sql {
    let q = Binds::default();
    // One row per scale score.
    let sc: Vec<String> = cut
        .branches
        .iter()
        .map(|b| {
            let conds = used(p, b);
            let flags: String = (0..width)
                .map(|i| match conds.get(i) {
                    Some(c) => format!("condition = {} AS h_{i}, ", q.bind(c)),
                    None => format!("FALSE AS h_{i}, "),
                })
                .collect();
            let combo = if cut.keyed() {
                format!("CAST({} AS BIGINT) AS combo, ", b.combo)
            } else {
                String::new()
            };
            let from = if b.by_rule {
                format!("scores_by_rule WHERE rule = {}", q.bind(&b.rule))
            } else {
                "scores".to_string()
            };
            format!(
                "SELECT {combo}source, label, study, model, arm, cohort, condition, CAST(sample AS BIGINT) AS sample, \
                   test, dimension, CAST(score AS BIGINT) AS v, complete, z IS NOT NULL AS has_z, constant_answers, \
                   {is_p} AS is_p, {is_s} AS is_s, ({is_p} OR {is_s}) AS is_used, {} AS is_to, {} AS is_from, {flags}\
                   CASE WHEN sample = 0 THEN condition ELSE condition || '[' || CAST(sample AS VARCHAR) || ']' END AS admin \
                 FROM {from}",
                q.in_list("condition", &p.shift_to),
                q.in_list("condition", &p.shift_from),
                is_p = q.in_list("condition", &b.protocol),
                is_s = q.in_list("condition", &p.sampling_conditions),
            )
        })
        .collect();
    q.sql(sc.join(" UNION ALL "))
}

/// `cm`: the integer moments per cell (only protocol / sampling scores with a z enter them),
/// the condition flags, the packed rerun scores and the administrations that keep the cell
/// out (`incomplete`, `no_z`); with `setups` (the protocol conditions),
/// also `inf_v`, the list of the cell's protocol and
/// sampling scores that `ps_cell` reads (packed with their setups' positions).
fn cm_view(p: &Params, k: &str, width: usize, setups: Option<&[String]>) -> Sql {
    let q = Binds::default();
    let mut has = String::new();
    for i in 0..width {
        has.push_str(&format!(
            "SUM(CASE WHEN h_{i} THEN 1 ELSE 0 END) AS has_{i}, "
        ));
    }
    // A rerun pair compares the lowest sample of each of its two conditions. One MIN finds that
    // sample and its score together: sample * RERUN_PACK + score, where a score without a z (or
    // no score) packs as RERUN_NONE. Exact, because check_scores refuses a score that is not an
    // integer 0..100; `reasons` unpacks it. (A ROW_NUMBER window here sorted every scale score.)
    let mut reruns = String::new();
    for (i, [a, b]) in p.rerun_pairs.iter().enumerate() {
        for (side, c) in [("ra", a), ("rb", b)] {
            reruns.push_str(&format!(
                "MIN(CASE WHEN condition = {} THEN sample * {RERUN_PACK} + \
                   CASE WHEN has_z AND v IS NOT NULL THEN v ELSE {RERUN_NONE} END END) AS {side}_{i}, ",
                q.bind(c)
            ));
        }
    }
    // The inference tables read each cell's scores from a list gathered in this grouping,
    // which already meets every scale score once per cell (a second grouping over the scores
    // cost more than the tests). A score travels as one integer, position * SETUP_PACK +
    // score (exact for the same reason as the rerun packing), where the position is its
    // setup's among the protocol conditions, or their count for a sampling score: a list of
    // integers costs a fraction of lists of (condition, score) structs. The tests themselves
    // (`ps_cell`) run later, on the kept cells only (`inference`).
    let inf = match setups {
        Some(protocol) => {
            // A CASE of literals is one hash lookup per row (DataFusion's literal lookup
            // table), and bound names are literals by then ([`Binds::bind`]); validate()
            // refuses a condition listed twice or in both sets.
            let mut position = String::from("CASE condition ");
            for (i, c) in protocol.iter().enumerate() {
                position.push_str(&format!("WHEN {} THEN {i} ", q.bind(c)));
            }
            for c in &p.sampling_conditions {
                position.push_str(&format!("WHEN {} THEN {} ", q.bind(c), protocol.len()));
            }
            format!(
                ", ps_ints(({position}END) * {pack} + v) FILTER (WHERE has_z) AS inf_v",
                pack = crate::functions::SETUP_PACK
            )
        }
        None => String::new(),
    };
    // The administrations that keep the cell out, listed by name in (condition, sample) order
    // (`admins_in_order`, crate::functions): the lists gather only those few rows.
    let named = "named_struct('condition', condition, 'sample', sample, 'admin', admin)";
    // Integer moments per cell (only protocol / sampling scores with a z enter them).
    q.sql(format!(
        "SELECT {k}source, model, test, dimension, COUNT(*) AS rows_n, \
           SUM(CASE WHEN is_s THEN 1 ELSE 0 END) AS s_rows, {has}{reruns} \
           SUM(CASE WHEN is_p AND has_z THEN 1 ELSE 0 END) AS pn, \
           SUM(CASE WHEN is_p AND has_z THEN v END) AS ps, \
           SUM(CASE WHEN is_p AND has_z THEN v * v END) AS pq, \
           MIN(CASE WHEN is_p AND has_z THEN v END) AS pmin, \
           MAX(CASE WHEN is_p AND has_z THEN v END) AS pmax, \
           SUM(CASE WHEN is_s AND has_z THEN 1 ELSE 0 END) AS sn, \
           SUM(CASE WHEN is_s AND has_z THEN v END) AS ss, \
           SUM(CASE WHEN is_s AND has_z THEN v * v END) AS sq, \
           SUM(CASE WHEN is_to AND has_z THEN 1 ELSE 0 END) AS tn, \
           SUM(CASE WHEN is_to AND has_z THEN v END) AS ts, \
           SUM(CASE WHEN is_from AND has_z THEN 1 ELSE 0 END) AS fn_, \
           SUM(CASE WHEN is_from AND has_z THEN v END) AS fs, \
           SUM(CASE WHEN is_used AND constant_answers THEN 1 ELSE 0 END) AS const_n, \
           admins_in_order(array_agg({named}) FILTER (WHERE is_used AND NOT (complete AND v IS NOT NULL))) \
             AS incomplete, \
           admins_in_order(array_agg({named}) FILTER (WHERE is_used AND complete AND v IS NOT NULL AND NOT has_z)) \
             AS no_z{inf} \
         FROM sc GROUP BY {k}source, model, test, dimension"
    ))
}

/// `cell_parts` (every cell of the universe with its `cm` columns) and `reasons`
/// (each cell's drop reasons, unformatted).
fn cell_views(p: &Params, cut: &Cut, width: usize, tests: bool) -> (String, Sql) {
    let k = cut.k("");
    let q = Binds::default();
    let sep = q.in_list("u.arm", &p.separate_arms);
    // The branch's conditions without an administration, by name in the branch's order.
    let missing = cut.per_branch("u", |b| {
        let m: Vec<String> = used(p, b)
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let optional = if i >= b.protocol.len() {
                    "NOT sopt AND "
                } else {
                    ""
                };
                format!(
                    "CASE WHEN {optional}COALESCE(has_{i}, 0) = 0 THEN {} END",
                    q.bind(c)
                )
            })
            .collect();
        format!("concat_ws(', ', {})", m.join(", "))
    });
    // The per-cell columns of `cm` (all BIGINT), in the order `reasons` lists them.
    let mut cm_names: Vec<String> = (0..width).map(|i| format!("has_{i}")).collect();
    for i in 0..p.rerun_pairs.len() {
        cm_names.push(format!("ra_{i}"));
        cm_names.push(format!("rb_{i}"));
    }
    for c in [
        "s_rows", "rows_n", "pn", "ps", "pq", "pmin", "pmax", "sn", "ss", "sq", "tn", "ts", "fn_",
        "fs", "const_n",
    ] {
        cm_names.push(c.to_string());
    }
    let cm_nulls: String = cm_names
        .iter()
        .map(|c| format!("CAST(NULL AS BIGINT) AS {c}, "))
        .collect();
    let mut cm_cols = String::new();
    for i in 0..width {
        cm_cols.push_str(&format!("has_{i}, "));
    }
    for i in 0..p.rerun_pairs.len() {
        for side in ["ra", "rb"] {
            cm_cols.push_str(&format!(
                "CASE WHEN {side}_{i} % {RERUN_PACK} <> {RERUN_NONE} THEN {side}_{i} % {RERUN_PACK} END AS {side}_{i}, "
            ));
        }
    }
    // Every cell of the universe with its `cm` columns (null where `cm` has no row for it)
    // and `has_test`, whether the model took the cell's test at all. `cm` has a row only for a
    // cell of the universe, and that cell's test was taken. The other cells of the universe
    // come from a grouping per (model, test): whether `cm` has the test for the model, and
    // which of its scales; every other scale of the test (joined from `scales`, a row per
    // scale of the source) is a cell without a row. Each join holds its small side (the
    // left one: the planner keeps it as the build side when the other's size is unknown), a
    // row per test or scale of the source, or per model: a hash join cannot spill, and one
    // that held a per-cell table took hundreds of MB at 10^8 answers.
    // The model's label, study, arm and cohort are joined last (a row per model), not carried
    // as four more texts per cell.
    let v = "CAST(NULL AS VARCHAR)";
    let cm_c: String = cm_names.iter().map(|c| format!("{c}, ")).collect();
    let cell = format!(
        "SELECT g.*, m.label, m.study, m.arm, m.cohort \
         FROM models m JOIN ( \
               SELECT {k}source, model, test, dimension, {cm_c}incomplete, no_z, TRUE AS has_test{inf} FROM cm \
               UNION ALL \
               SELECT {ks}t.source, t.model, s.test, s.dimension, {cm_nulls}{v}, {v}, t.has_test{inf_null} \
               FROM scales s JOIN ( \
                   SELECT {k}source, model, test, bool_or(in_cm) AS has_test, \
                     array_agg(dimension) FILTER (WHERE in_cm) AS present \
                   FROM (SELECT {km}m.source, m.model, x.test, {v} AS dimension, FALSE AS in_cm \
                         FROM (SELECT DISTINCT {k}source, test FROM scales) x \
                         JOIN models m ON {mx}m.source = x.source \
                         UNION ALL \
                         SELECT {k}source, model, test, dimension, TRUE FROM cm) \
                   GROUP BY {k}source, model, test) t \
                 ON {st}s.source = t.source AND s.test = t.test \
               WHERE NOT text_in(t.present, s.dimension)) g \
           ON {mg}m.source = g.source AND m.model = g.model",
        ks = cut.k("t"),
        km = cut.k("m"),
        mx = cut.on("m", "x"),
        st = cut.on("s", "t"),
        mg = cut.on("m", "g"),
        inf = if tests { ", inf_v" } else { "" },
        inf_null = if tests { ", NULL AS inf_v" } else { "" },
    );
    let reasons = q.sql(format!(
        "SELECT u.*, \
           CASE WHEN {missing} <> '' THEN 'missing administrations: ' || {missing} END AS r1, \
           'incomplete administrations: ' || incomplete AS r2, \
           'no score in human SDs (z is null): ' || no_z AS r3 \
         FROM (SELECT {k}source, label, study, model, arm, cohort, test, dimension, \
                 {sep} AND COALESCE(s_rows, 0) = 0 AS sopt, {cm_cols} \
                 rows_n, pn, ps, pq, pmin, pmax, sn, ss, sq, tn, ts, fn_, fs, const_n, incomplete, no_z, \
                 has_test{inf} \
               FROM cell_parts u) u",
        inf = if tests { ", inf_v" } else { "" },
    ));
    (cell, reasons)
}

/// The per-cell table (`cells`), unsorted: the stage sorts it by [`Cut::cell_key`] in a plan of its own.
pub(crate) fn cells(p: &Params, cut: &Cut, tests: bool) -> String {
    let k = cut.k("");
    let reruns: Vec<(String, String)> = p
        .rerun_pairs
        .iter()
        .enumerate()
        .map(|(i, [a, b])| {
            (
                format!("rerun_{a}_{b}_z"),
                format!("CASE WHEN kept THEN ps_diff_z(abs(ra_{i} - rb_{i}), h) END"),
            )
        })
        .collect();
    let select = cells_select(
        &[
            ("drop_reason", "CASE WHEN NOT kept THEN reason END"),
            ("protocol_n", "COALESCE(pn, 0)"),
            ("sampling_n", "COALESCE(sn, 0)"),
            (
                "protocol_mean_z",
                "CASE WHEN kept THEN ps_mean_z(pn, ps, hm, h) END",
            ),
            (
                "protocol_sd",
                "CASE WHEN kept THEN ps_sd_z(pn, ps, pq, h) END",
            ),
            (
                "sampling_sd",
                "CASE WHEN kept THEN ps_sd_z(sn, ss, sq, h) END",
            ),
            (
                "ratio",
                "CASE WHEN kept THEN ps_ratio(pn, ps, pq, sn, ss, sq) END",
            ),
            (
                "ratio_rule",
                "CASE WHEN kept THEN ps_ratio_rule(pn, ps, pq, sn, ss, sq) END",
            ),
            (
                "protocol_gt_sampling",
                "CASE WHEN kept THEN ps_variance_gt(pn, ps, pq, sn, ss, sq) END",
            ),
            ("min_z", "CASE WHEN kept THEN ps_z(pmin, hm, h) END"),
            ("max_z", "CASE WHEN kept THEN ps_z(pmax, hm, h) END"),
            (
                "range_z",
                "CASE WHEN kept THEN ps_diff_z(pmax - pmin, h) END",
            ),
            (
                "shift_z",
                "CASE WHEN kept THEN ps_shift_z(tn, ts, fn_, fs, h) END",
            ),
            ("constant_administrations", "COALESCE(const_n, 0)"),
        ],
        &reruns,
    );
    // With the tests, each kept cell also carries its scores for `ps_cell` (`inf_v` of `cm`),
    // so that the inference tables read them from `cells` with no join of two per-cell tables.
    let inf = if tests {
        ", CASE WHEN kept THEN inf_v END AS inf_v"
    } else {
        ""
    };
    format!(
        "SELECT {k}{select}{inf} \
         FROM ( \
           SELECT r.*, reason = '' AS kept, n.mean AS hm, n.sd AS h \
           FROM norms_n n RIGHT JOIN ( \
             SELECT *, CASE WHEN rows_n IS NULL AND NOT has_test \
                 THEN 'test not administered (no scale scores)' \
                 ELSE concat_ws('; ', r1, r2, r3, r4, \
                   CASE WHEN r1 IS NULL AND r2 IS NULL AND r3 IS NULL AND r4 IS NULL AND COALESCE(pn, 0) < 2 \
                     THEN 'fewer than two protocol administrations' END) END AS reason \
             FROM (SELECT *, CASE WHEN r1 IS NULL AND r2 IS NULL AND r3 IS NULL AND NOT sopt AND COALESCE(sn, 0) < 2 \
                     THEN 'fewer than two sampling administrations' END AS r4 FROM reasons) \
           ) r ON r.test = n.test AND r.dimension = n.dimension \
         )"
    )
}

/// A SQL identifier, quoted.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether `name` is a rerun column of [`CELLS`] (`rerun_<first>_<rerun>_z`).
fn is_rerun_column(name: &str) -> bool {
    name.starts_with("rerun_") && name.ends_with("_z")
}

/// The select list of `cells`: the columns of [`CELLS`] in order ([`TableContract::projection`]
/// with `exprs`), except that the contract's rerun columns (the default pairs') are replaced by
/// `reruns`, (column, expression) of each configured pair, in their place.
fn cells_select(exprs: &[(&str, &str)], reruns: &[(String, String)]) -> String {
    let mut out: Vec<(bool, String)> = Vec::new();
    for c in CELLS.columns() {
        if is_rerun_column(c.name) {
            if !out.iter().any(|(rerun, _)| *rerun) {
                out.extend(
                    reruns
                        .iter()
                        .map(|(n, e)| (true, format!("{e} AS {}", quoted(n)))),
                );
            }
            continue;
        }
        let col = match exprs.iter().find(|(n, _)| *n == c.name) {
            Some((_, e)) => format!("{e} AS {}", quoted(c.name)),
            None => quoted(c.name),
        };
        out.push((false, col));
    }
    for (n, _) in exprs {
        assert!(
            !is_rerun_column(n),
            "{n}: rerun columns come from the pairs"
        );
        CELLS.column(n);
    }
    out.into_iter()
        .map(|(_, c)| c)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `contract`'s projection with `exprs` given as owned strings.
fn project(contract: &TableContract, exprs: &[(&str, String)]) -> String {
    let exprs: Vec<(&str, &str)> = exprs.iter().map(|(n, e)| (*n, e.as_str())).collect();
    contract.projection(&exprs)
}

/// A relation with the columns of `contract`, of their types, and no row.
fn no_rows(contract: &TableContract) -> String {
    use protospread_core::ColumnType;
    let cols: Vec<String> = contract
        .columns()
        .iter()
        .map(|c| {
            let ty = match c.ty {
                ColumnType::Text | ColumnType::Label => "VARCHAR",
                ColumnType::Int32 => "INT",
                ColumnType::Int64 => "BIGINT",
                ColumnType::Float64 => "DOUBLE",
                ColumnType::Boolean => "BOOLEAN",
            };
            format!("CAST(NULL AS {ty}) AS {}", quoted(c.name))
        })
        .collect();
    format!("SELECT {} WHERE FALSE", cols.join(", "))
}

/// The rows of `rows` (cells, `WHERE where_`), once per group they belong to, with the group's
/// key columns `g0..gk` (null past the group's depth) and its name: `grouped(p, "cells",
/// "kept", q)` is every kept cell. The groups' names are bound in `q`.
fn grouped(p: &Params, rows: &str, where_: &str, q: &Binds) -> String {
    let mut parts = Vec::new();
    for k in 1..=p.groups.len() {
        let mut keys = Vec::new();
        let mut conds = Vec::new();
        let mut name = Vec::new();
        for (j, g) in p.groups.iter().enumerate() {
            if j < k {
                keys.push(format!("{g} AS g{j}"));
                conds.push(format!("{g} IS NOT NULL"));
                name.push(format!("{} || {g}", q.bind(&format!("{g}="))));
            } else {
                keys.push(format!("CAST(NULL AS VARCHAR) AS g{j}"));
            }
        }
        parts.push(format!(
            "SELECT *, {}, {} AS grp FROM {rows} WHERE {where_} AND {}",
            keys.join(", "),
            name.join(" || ' ' || "),
            conds.join(" AND ")
        ));
    }
    format!("({})", parts.join(" UNION ALL "))
}

fn group_keys(p: &Params) -> (String, String) {
    let cols: Vec<String> = (0..p.groups.len()).map(|j| format!("g{j}")).collect();
    let order: Vec<String> = cols.iter().map(|c| format!("{c} NULLS FIRST")).collect();
    (cols.join(", "), order.join(", "))
}

fn share(k: &str, n: &str) -> String {
    format!("CASE WHEN {n} > 0 THEN CAST({k} AS DOUBLE) / CAST({n} AS DOUBLE) END")
}

const LABEL: &str = "first_value(label ORDER BY model, test, dimension) AS label";
const EXCEEDING: &str = "SUM(CASE WHEN protocol_gt_sampling THEN 1 ELSE 0 END)";

/// The group tables, each (contract, SQL) over `cells`. Rows come in the order of the group's
/// name (its keys break a tie of two names).
pub(crate) fn group_tables(p: &Params) -> Vec<(&'static TableContract, Sql)> {
    // Every table but `separate_arms` reads the groups, each its own statement.
    let groups = || {
        let q = Binds::default();
        (grouped(p, "cells", "kept", &q), q)
    };
    let (g, q) = groups();
    let (keys, order) = group_keys(p);
    let pvs = q.sql(format!(
        "SELECT {} FROM ( \
           SELECT source, {keys}, grp, {LABEL}, COUNT(DISTINCT model) AS models, COUNT(*) AS cells, \
             COUNT(protocol_gt_sampling) AS compared_cells, {EXCEEDING} AS protocol_gt_sampling, \
             COUNT(ratio) AS ratio_cells, median(ratio) AS median_ratio \
           FROM {g} GROUP BY source, {keys}, grp) ORDER BY source, \"group\", {order}",
        project(
            &PROTOCOL_VS_SAMPLING,
            &[
                ("group", "grp".to_string()),
                ("share", share("protocol_gt_sampling", "compared_cells")),
            ]
        )
    ));
    let (g, q) = groups();
    let range = q.sql(format!(
        "SELECT {} FROM ( \
           SELECT source, {keys}, grp, {LABEL}, COUNT(range_z) AS cells, median(range_z) AS median_range_z, \
             MIN(range_z) AS min_range_z, MAX(range_z) AS max_range_z, \
             SUM(CASE WHEN range_z >= 1.0 THEN 1 ELSE 0 END) AS cells_range_ge_1, \
             SUM(CASE WHEN range_z >= 2.0 THEN 1 ELSE 0 END) AS cells_range_ge_2 \
           FROM {g} GROUP BY source, {keys}, grp) ORDER BY source, \"group\", {order}",
        RANGE.projection(&[("group", "grp")])
    ));
    let (g, q) = groups();
    let by_test = q.sql(format!(
        "SELECT {} FROM ( \
           SELECT source, {keys}, grp, test, {LABEL}, COUNT(*) AS cells, \
             COUNT(protocol_gt_sampling) AS compared_cells, {EXCEEDING} AS protocol_gt_sampling, \
             median(ratio) AS median_ratio, median(range_z) AS median_range_z \
           FROM {g} GROUP BY source, {keys}, grp, test) ORDER BY source, \"group\", test, {order}",
        project(
            &BY_TEST,
            &[
                ("group", "grp".to_string()),
                ("share", share("protocol_gt_sampling", "compared_cells")),
            ]
        )
    ));
    let (g, q) = groups();
    let mut pairs = Vec::new();
    for (i, [a, b]) in p.rerun_pairs.iter().enumerate() {
        let col = format!(
            "\"rerun_{}_{}_z\"",
            a.replace('"', "\"\""),
            b.replace('"', "\"\"")
        );
        pairs.push(format!(
            "SELECT source, {keys}, grp, {i} AS pair_i, {} AS pair, {LABEL}, COUNT({col}) AS cells, \
               SUM(CASE WHEN {col} = 0 THEN 1 ELSE 0 END) AS cells_identical, \
               median({col}) AS median_diff_z, MAX({col}) AS max_diff_z \
             FROM {g} GROUP BY source, {keys}, grp",
            q.bind(&format!("{a} vs {b}"))
        ));
    }
    let reruns = if pairs.is_empty() {
        no_rows(&RERUNS).into()
    } else {
        q.sql(format!(
            "SELECT {} FROM ({}) ORDER BY source, \"group\", {order}, pair_i",
            RERUNS.projection(&[("group", "grp")]),
            pairs.join(" UNION ALL ")
        ))
    };
    // The reference of "same direction" is the source's headline arm (table `headline`).
    let q = Binds::default();
    let separate = format!(
        "WITH ref AS (SELECT x.source, x.test, x.dimension, median(x.shift_z) AS r \
           FROM cells x JOIN headline hl ON x.source = hl.source AND x.arm = hl.arm \
           WHERE x.kept AND x.shift_z IS NOT NULL GROUP BY x.source, x.test, x.dimension), \
         c AS (SELECT x.*, CASE WHEN ref.r IS NULL OR x.shift_z IS NULL OR ref.r = 0 OR x.shift_z = 0 THEN NULL \
                 ELSE (ref.r > 0) = (x.shift_z > 0) END AS same_dir \
               FROM cells x LEFT JOIN ref ON x.source = ref.source AND x.test = ref.test \
                 AND x.dimension = ref.dimension WHERE x.kept AND {}) \
         SELECT {} FROM ( \
           SELECT source, arm, {LABEL}, COUNT(DISTINCT model) AS models, COUNT(*) AS cells, \
             COUNT(same_dir) AS direction_cells, SUM(CASE WHEN same_dir THEN 1 ELSE 0 END) AS same_direction, \
             median(range_z) AS median_range_z, COUNT(protocol_gt_sampling) AS compared_cells, \
             {EXCEEDING} AS protocol_gt_sampling \
           FROM c GROUP BY source, arm) g LEFT JOIN headline hl ON g.source = hl.source \
         ORDER BY g.source, g.arm",
        q.in_list("x.arm", &p.separate_arms),
        project(
            &SEPARATE_ARMS,
            &[
                ("source", "g.source".to_string()),
                ("arm", "g.arm".to_string()),
                ("reference_arm", "hl.arm".to_string()),
                ("share", share("same_direction", "direction_cells")),
            ]
        )
    );
    vec![
        (&PROTOCOL_VS_SAMPLING, pvs),
        (&RANGE, range),
        (&BY_TEST, by_test),
        (&RERUNS, reruns),
        (&SEPARATE_ARMS, q.sql(separate)),
    ]
}

/// `req`, the request counts per (source, model, condition), from the strict rule's rows of
/// `reply_rules`.
pub(crate) fn request_view() -> Sql {
    let q = Binds::default();
    // The score stage counts each request once, as it reads it (`reply_rules`, a row per
    // source, model, condition, mode and rule): grouping every parsed answer again here was
    // the largest plan of the stage (about 10 s of 30 at 10^8 answers). A request is failed,
    // readable (every shown position read `ok`) or unreadable; its items likewise.
    // Label, arm and cohort: a model has one of each (`check_labels` refuses another), so the
    // MIN is the model's; `check_requests` refuses counts that do not add up.
    let strict = q.bind(STRICT);
    q.sql(format!(
        "SELECT source, MIN(label) AS label, model, MIN(arm) AS arm, MIN(cohort) AS cohort, condition, \
           SUM(requests) AS requests, SUM(failed_requests) AS failed_requests, \
           SUM(CAST(requests AS BIGINT) - failed_requests - readable_replies) AS unreadable_replies, \
           SUM(items) AS items, \
           SUM(CAST(items AS BIGINT) - failed_items - readable_items) AS unreadable_items \
         FROM reply_rules WHERE rule = {strict} GROUP BY source, model, condition"
    ))
}

/// `adm`, one row per administration of the scale scores.
pub(crate) fn administrations_view() -> String {
    administrations("scores", "", "")
}

/// The study's own reply rule, which `[score] reply_rules` always lists first.
pub(crate) const STRICT: &str = "strict";

/// `requests` and `constant_runs`, each (contract, SQL).
pub(crate) fn request_tables() -> Vec<(&'static TableContract, String)> {
    let a_or_q = |c: &str| format!("CASE WHEN administrations > 0 THEN a_{c} ELSE q_{c} END");
    let columns = project(
        &REQUESTS,
        &[
            ("label", a_or_q("label")),
            ("arm", a_or_q("arm")),
            ("cohort", a_or_q("cohort")),
            ("unreadable_share", share("unreadable_replies", "requests")),
            (
                "constant_administrations",
                "COALESCE(constant_administrations, 0)".to_string(),
            ),
        ],
    );
    // A row per (source, model, condition) of the administrations (`adm`) or the request
    // counts (`req`, one row per key), or both: a grouping of the two, not a full outer join,
    // which would hold one of them (a row per model and condition) in memory that cannot
    // spill. The request counts are `req`'s (null without a row there); label, arm and cohort
    // the administrations' when there are any.
    let requests = format!(
        "SELECT {columns} \
         FROM (SELECT source, model, condition, \
                 MIN(a_label) AS a_label, MIN(a_arm) AS a_arm, MIN(a_cohort) AS a_cohort, \
                 MIN(q_label) AS q_label, MIN(q_arm) AS q_arm, MIN(q_cohort) AS q_cohort, \
                 MAX(requests) AS requests, MAX(failed_requests) AS failed_requests, \
                 MAX(unreadable_replies) AS unreadable_replies, MAX(items) AS items, \
                 MAX(unreadable_items) AS unreadable_items, \
                 SUM(adm_n) AS administrations, SUM(constant) AS constant_administrations \
               FROM (SELECT source, model, condition, label AS a_label, arm AS a_arm, cohort AS a_cohort, \
                       {v} AS q_label, {v} AS q_arm, {v} AS q_cohort, {n} AS requests, \
                       {n} AS failed_requests, {n} AS unreadable_replies, {n} AS items, \
                       {n} AS unreadable_items, CAST(1 AS BIGINT) AS adm_n, CAST(constant AS BIGINT) AS constant \
                     FROM adm \
                     UNION ALL \
                     SELECT source, model, condition, {v}, {v}, {v}, label, arm, cohort, \
                       CAST(requests AS BIGINT), CAST(failed_requests AS BIGINT), \
                       CAST(unreadable_replies AS BIGINT), CAST(items AS BIGINT), \
                       CAST(unreadable_items AS BIGINT), CAST(0 AS BIGINT), {n} \
                     FROM req) \
               GROUP BY source, model, condition) \
         ORDER BY source, model, condition",
        v = "CAST(NULL AS VARCHAR)",
        n = "CAST(NULL AS BIGINT)",
    );
    let constant = format!(
        "SELECT {} FROM adm WHERE constant = 1 ORDER BY source, model, condition, sample, test",
        CONSTANT_RUNS.projection(&[])
    );
    vec![(&REQUESTS, requests), (&CONSTANT_RUNS, constant)]
}

/// The arms each source has, over its scale scores and its requests: (source, arm), sorted.
pub(crate) const SOURCE_ARMS: &str = "SELECT source, arm FROM ( \
       SELECT DISTINCT source, arm FROM scores UNION SELECT DISTINCT source, arm FROM req \
     ) WHERE arm IS NOT NULL ORDER BY source, arm";

/// The columns of the side-by-side per-cell table (`cells_by_rule`) over the `cells` of `cut`:
/// those of `cells` that do not depend on `shift_from`/`shift_to` or `rerun_pairs`, which a
/// protocol set may not hold.
pub(crate) fn cells_side(cut: &Cut) -> Sql {
    let q = Binds::default();
    let columns = project(&CELLS_BY_RULE, &cut.rule_set("", &q));
    q.sql(format!(
        "SELECT {columns} FROM cells ORDER BY {}source, model, test, dimension",
        cut.k(""),
    ))
}

/// One row per source (and branch of `cut`): the group `arm=<headline arm>` of
/// `protocol_vs_sampling` over `cells`, also when it has no kept cell (then with its dropped
/// cells counted and no statistics).
pub(crate) fn headline_group(cut: &Cut) -> Sql {
    let q = Binds::default();
    let columns = headline_group_columns(cut, &q);
    q.sql(format!(
        "SELECT {columns} \
         FROM (SELECT {k}source, {LABEL} FROM cells GROUP BY {k}source) s \
         JOIN headline hl ON s.source = hl.source \
         LEFT JOIN (SELECT {kx}x.source, COUNT(DISTINCT CASE WHEN x.kept THEN x.model END) AS models, \
                      SUM(CASE WHEN x.kept THEN 1 ELSE 0 END) AS cells, \
                      SUM(CASE WHEN x.kept THEN 0 ELSE 1 END) AS dropped_cells, \
                      COUNT(x.protocol_gt_sampling) AS compared_cells, \
                      SUM(CASE WHEN x.protocol_gt_sampling THEN 1 ELSE 0 END) AS protocol_gt_sampling, \
                      COUNT(x.ratio) AS ratio_cells, median(x.ratio) AS median_ratio, \
                      median(x.range_z) AS median_range_z \
                    FROM cells x JOIN headline h2 ON x.source = h2.source AND x.arm = h2.arm \
                    GROUP BY {kx}x.source) c ON {sc}s.source = c.source \
         ORDER BY {ks}s.source",
        k = cut.k(""),
        kx = cut.k("x"),
        ks = cut.k("s"),
        sc = cut.on("s", "c"),
    ))
}

/// The select list of [`headline_group`]: [`PROTOCOL_VS_SAMPLING_BY_RULE`]'s columns, the
/// names bound in `q`.
fn headline_group_columns(cut: &Cut, q: &Binds) -> String {
    let mut exprs: Vec<(&str, String)> = cut.rule_set("s", q).into();
    for (c, e) in [
        ("source", "s.source"),
        ("label", "s.label"),
        ("arm", "hl.arm"),
        ("group", "'arm=' || hl.arm"),
        ("median_ratio", "c.median_ratio"),
        ("median_range_z", "c.median_range_z"),
    ] {
        exprs.push((c, e.to_string()));
    }
    for c in [
        "models",
        "cells",
        "dropped_cells",
        "compared_cells",
        "protocol_gt_sampling",
        "ratio_cells",
    ] {
        exprs.push((c, format!("COALESCE(c.{c}, 0)")));
    }
    exprs.push(("share", share("c.protocol_gt_sampling", "c.compared_cells")));
    project(&PROTOCOL_VS_SAMPLING_BY_RULE, &exprs)
}

/// The requests of each branch of `cut` under its reply rule, over the conditions it uses:
/// (`combo`,) source, arm, condition, mode, requests, unreadable_replies, from the rule's rows
/// of `reply_rules`: a received reply (a request not failed) the rule cannot read. The names
/// are bound in `q`.
pub(crate) fn side_requests(p: &Params, cut: &Cut, q: &Binds) -> String {
    let parts: Vec<String> = cut
        .branches
        .iter()
        .map(|b| {
            let combo = if cut.keyed() {
                format!("CAST({} AS BIGINT) AS combo, ", b.combo)
            } else {
                String::new()
            };
            let conds: Vec<String> = used(p, b).into_iter().cloned().collect();
            format!(
                "SELECT {combo}r.source, r.arm, r.condition, r.mode, r.requests, \
                   r.requests - r.readable - r.failed AS unreadable_replies \
                 FROM (SELECT source, model, arm, condition, MIN(mode) AS mode, \
                         SUM(requests) AS requests, SUM(readable_replies) AS readable, \
                         SUM(failed_requests) AS failed \
                       FROM reply_rules WHERE rule = {} AND {} GROUP BY source, model, arm, condition) r",
                q.bind(&b.rule),
                q.in_list("condition", &conds),
            )
        })
        .collect();
    format!("({})", parts.join(" UNION ALL "))
}

/// One row per administration: (source, label, model, arm, cohort, condition, sample, test,
/// constant: 1 if every item got the same answer). Over `from` (a relation with the scale
/// scores' columns), grouped by `k` (a key prefix) too, of the rows `filter` keeps.
fn administrations(from: &str, k: &str, filter: &str) -> String {
    format!(
        "SELECT {k}source, label, model, arm, cohort, condition, CAST(sample AS BIGINT) AS sample, test, \
           MAX(CASE WHEN constant_answers THEN 1 ELSE 0 END) AS constant \
         FROM {from} {filter} GROUP BY {k}source, label, model, arm, cohort, condition, sample, test"
    )
}

/// The administrations ([`administrations`]) of the conditions each branch of `cut` uses,
/// over the views of `cut` (`sc`).
pub(crate) fn side_administrations(cut: &Cut) -> String {
    administrations("sc", &cut.k(""), "WHERE is_used")
}

/// The administrations of table `adm` in the conditions the one branch of `cut` uses, bound
/// in `q`.
pub(crate) fn used_administrations(p: &Params, cut: &Cut, q: &Binds) -> String {
    let conds: Vec<String> = used(p, &cut.branches[0]).into_iter().cloned().collect();
    format!(
        "(SELECT * FROM adm WHERE {})",
        q.in_list("condition", &conds)
    )
}

/// One row per source (and branch of `cut`) with the verdict's figures over the kept cells of
/// the source's headline arm (table `headline`). `req` (source, arm, condition, requests,
/// unreadable_replies) and `adm` (source, arm, condition, constant: one row per
/// administration) are relations, each with `combo` when `cut` has several branches. With
/// `explain`, `req` must also have `mode`: the column `unread_in` then lists the conditions
/// with unreadable replies (for [`verdict`]'s explanation).
pub(crate) fn verdict_summary(
    p: &Params,
    cut: &Cut,
    req: &str,
    adm: &str,
    explain: bool,
) -> String {
    let (vs, vr) = (flit(p.verdict_share), flit(p.verdict_ratio));
    let k = cut.k("");
    // With `explain`, the conditions with unreadable replies per source (and branch).
    let (unread_col, unread_join) = if explain {
        (
            "ui.unread_in".to_string(),
            format!(
                "LEFT JOIN (SELECT {k}source, string_agg(CASE WHEN u > 0 THEN \
                     CASE WHEN mode = 'whole' THEN 'whole-test ' ELSE 'single-item ' END || condition || ' ' || \
                     CAST(u AS VARCHAR) || ' of ' || CAST(n AS VARCHAR) END, ', ' ORDER BY mode DESC, condition) AS unread_in \
                   FROM (SELECT {kr}r.source, r.mode, r.condition, SUM(r.unreadable_replies) AS u, SUM(r.requests) AS n \
                         FROM {req} r JOIN headline hl ON r.source = hl.source AND r.arm = hl.arm \
                         GROUP BY {kr}r.source, r.mode, r.condition) GROUP BY {k}source) ui \
                   ON {sui}src.source = ui.source",
                kr = cut.k("r"),
                sui = cut.on("src", "ui"),
            ),
        )
    } else {
        ("CAST(NULL AS VARCHAR)".to_string(), String::new())
    };
    let sh = share("k", "n");
    let us = share("unread", "req");
    let cs = share("cons", "adm_n");
    format!(
        "WITH s AS ( \
           SELECT {ksrc}src.source, src.label, hl.arm, COALESCE(h.n, 0) AS n, COALESCE(h.k, 0) AS k, h.mr, \
             COALESCE(q.req, 0) AS req, COALESCE(q.unread, 0) AS unread, \
             COALESCE(a.adm_n, 0) AS adm_n, COALESCE(a.cons, 0) AS cons, \
             COALESCE(dc.all_n, 0) AS arm_cells, COALESCE(dc.dropped, 0) AS dropped, dc.first_drop, \
             {unread_col} AS unread_in \
           FROM (SELECT {k}source, {LABEL} FROM cells GROUP BY {k}source) src \
           JOIN headline hl ON src.source = hl.source \
           LEFT JOIN (SELECT {kc}c.source, COUNT(c.protocol_gt_sampling) AS n, {EXCEEDING} AS k, median(c.ratio) AS mr \
                      FROM cells c JOIN headline hl ON c.source = hl.source AND c.arm = hl.arm \
                      WHERE c.kept GROUP BY {kc}c.source) h ON {sh_on}src.source = h.source \
           LEFT JOIN (SELECT {kr}r.source, SUM(r.requests) AS req, SUM(r.unreadable_replies) AS unread \
                      FROM {req} r JOIN headline hl ON r.source = hl.source AND r.arm = hl.arm \
                      GROUP BY {kr}r.source) q ON {sq_on}src.source = q.source \
           LEFT JOIN (SELECT {kd}d.source, COUNT(*) AS adm_n, SUM(d.constant) AS cons \
                      FROM {adm} d JOIN headline hl ON d.source = hl.source AND d.arm = hl.arm \
                      GROUP BY {kd}d.source) a ON {sa_on}src.source = a.source \
           LEFT JOIN (SELECT {kc}c.source, COUNT(*) AS all_n, SUM(CASE WHEN c.kept THEN 0 ELSE 1 END) AS dropped, \
                        first_value(CASE WHEN NOT c.kept THEN c.test || ' ' || c.dimension || ': ' || c.drop_reason END \
                          ORDER BY c.kept, c.model, c.test, c.dimension) AS first_drop \
                      FROM cells c JOIN headline hl ON c.source = hl.source AND c.arm = hl.arm \
                      GROUP BY {kc}c.source) dc ON {sdc_on}src.source = dc.source {unread_join}), \
         v AS (SELECT *, {sh} AS sh, {us} AS us, {cs} AS cs FROM s), \
         w AS (SELECT *, sh >= {vs} AS pass_share, mr >= {vr} AS pass_ratio FROM v) \
         SELECT * FROM w",
        ksrc = cut.k("src"),
        kc = cut.k("c"),
        kr = cut.k("r"),
        kd = cut.k("d"),
        sh_on = cut.on("src", "h"),
        sq_on = cut.on("src", "q"),
        sa_on = cut.on("src", "a"),
        sdc_on = cut.on("src", "dc"),
    )
}

/// The verdict rows from table `w` ([`verdict_summary`] collected): five criteria per source,
/// each naming the arm they are over. For the side-by-side table (`side`), each row starts
/// with its branch's `rule` and `protocol_set`, and a "no verdict" line says how many of the
/// arm's cells were dropped, the first one's reason and the conditions with unreadable replies.
pub(crate) fn verdict(p: &Params, w: &str, side: Option<&Cut>) -> Sql {
    let q = Binds::default();
    let (columns, k) = side.map_or((VERDICT.projection(&[]), String::new()), |c| {
        (project(&VERDICT_BY_RULE, &c.rule_set("", &q)), c.k(""))
    });
    let why = if side.is_some() {
        " || ': ' || CAST(dropped AS VARCHAR) || ' of ' || CAST(arm_cells AS VARCHAR) || ' arm=' || arm || ' cells dropped' || \
           CASE WHEN first_drop IS NULL THEN '' ELSE ' (first: ' || first_drop || ')' END || \
           CASE WHEN unread_in IS NULL OR unread_in = '' THEN '' ELSE '; unreadable replies: ' || unread_in END"
    } else {
        ""
    };
    let (vs, vr, vf) = (
        flit(p.verdict_share),
        flit(p.verdict_ratio),
        flit(p.verdict_few),
    );
    q.sql(format!(
        "SELECT {columns} FROM ( \
           SELECT {k}source, label, arm, 1 AS ord, 'share_protocol_gt_sampling' AS criterion, sh AS value, {vs} AS threshold, \
             pass_share AS passed, \
             'share of ' || CAST(n AS VARCHAR) || ' kept arm=' || arm || ' cells with protocol SD > sampling SD is at least the threshold' AS statement \
           FROM {w} w \
           UNION ALL \
           SELECT {k}source, label, arm, 2, 'median_ratio', mr, {vr}, pass_ratio, \
             'median ratio protocol SD / sampling SD over arm=' || arm || ' cells is at least the threshold' FROM {w} w \
           UNION ALL \
           SELECT {k}source, label, arm, 3, 'unreadable_replies_few', us, {vf}, us < {vf}, \
             CAST(unread AS VARCHAR) || ' of ' || CAST(req AS VARCHAR) || ' arm=' || arm || ' requests gave an unreadable reply: below the threshold counts as few' \
           FROM {w} w \
           UNION ALL \
           SELECT {k}source, label, arm, 4, 'constant_runs_few', cs, {vf}, cs < {vf}, \
             CAST(cons AS VARCHAR) || ' of ' || CAST(adm_n AS VARCHAR) || ' arm=' || arm || ' administrations gave constant answers: below the threshold counts as few' \
           FROM {w} w \
           UNION ALL \
           SELECT {k}source, label, arm, 5, 'verdict', CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE), \
             CASE WHEN pass_share IS NULL OR pass_ratio IS NULL THEN NULL ELSE pass_share AND pass_ratio END, \
             CASE WHEN pass_share IS NULL OR pass_ratio IS NULL THEN 'no kept arm=' || arm || ' cells: no verdict'{why} \
                  WHEN pass_share AND pass_ratio THEN 'arm=' || arm || ': protocol spread exceeds sampling noise: use the protocol spread as the error bar' \
                  ELSE 'arm=' || arm || ': the protocol spread is not shown to exceed sampling noise by the thresholds' END \
           FROM {w} w) ORDER BY {k}source, ord",
    ))
}

/// The inference tables (docs/statistics.md, "Inference"), over the study's per-cell views
/// (`sc` of the strict x primary combination) and `cells`: first the intermediate tables to
/// materialize, in order, then the tables, each (name, SQL).
pub(crate) struct Inference {
    pub(crate) intermediate: Vec<(&'static str, Step)>,
    pub(crate) tables: Vec<(&'static str, Sql)>,
}

/// How an intermediate table is computed.
pub(crate) enum Step {
    /// The rows of a plan.
    Plan(Sql),
    /// `function` of each group of the plan's rows (`crate::groups::per_group`): its first
    /// `keys` columns are the group's key, it sorts by them (nulls last), its last column is
    /// the item.
    Groups {
        sql: Sql,
        keys: usize,
        function: GroupFunction,
    },
}

/// See [`Inference`]. `cinf` holds every kept cell's columns of `cells` with `inf`, the struct
/// `ps_cell` makes of the cell's score lists in the study's `cm`; `ctest` the same with `inf`
/// unpacked: its permutation test, its lowest and highest setups and `pl`, its protocol sums
/// per setup. `cinf` and `inf_bh` hold the structs of `ps_cell` and `ps_bh` before the tables
/// read their fields: over a plan, DataFusion's optimizer moves each field access into the
/// projection that calls the function, which then ran once per field read (the bootstrap
/// nine times). `inf_headline_h` (a source's bootstrap) and `inf_ranking` (a scale's
/// rankings) are functions of whole groups, computed one group at a time.
pub(crate) fn inference(p: &Params) -> Inference {
    let cinf = "SELECT c.source, c.label, c.model, c.arm, c.cohort, c.test, c.dimension, c.protocol_n, \
           c.sampling_n, c.protocol_mean_z, c.protocol_sd, c.sampling_sd, c.ratio, c.protocol_gt_sampling, \
           c.min_z, c.max_z, ps_cell(c.inf_v) AS inf \
         FROM cells c WHERE c.kept"
        .to_string();
    let ctest = "SELECT source, label, model, arm, cohort, test, dimension, protocol_n, sampling_n, \
           protocol_mean_z, protocol_sd, sampling_sd, ratio, protocol_gt_sampling, min_z, max_z, \
           get_field(get_field(inf, 't'), 'splits') AS splits, get_field(get_field(inf, 't'), 'at_least') AS at_least, \
           get_field(get_field(inf, 't'), 'protocol_gt') AS null_gt, get_field(inf, 'lowest') AS lowest, \
           get_field(inf, 'highest') AS highest, get_field(inf, 'sums') AS pl \
         FROM cinf"
        .to_string();
    let bh_of = "ps_bh(array_agg(named_struct('a', at_least, 'n', splits)))";
    let cell_tests = "SELECT t.source, t.label, t.model, t.arm, t.cohort, t.test, t.dimension, t.protocol_n, \
           t.sampling_n, t.splits, t.at_least AS splits_at_least, \
           CAST(t.at_least AS DOUBLE) / CAST(t.splits AS DOUBLE) AS p_value, \
           CAST(t.null_gt AS DOUBLE) / CAST(t.splits AS DOUBLE) AS null_share_protocol_gt, \
           t.at_least * 20 <= t.splits AS p_le_0_05, \
           COALESCE(t.at_least * b.cut_n <= b.cut_a * t.splits, FALSE) AS bh_rejected \
         FROM ctest t JOIN (SELECT source, arm, get_field(x, 'cut_a') AS cut_a, get_field(x, 'cut_n') AS cut_n \
             FROM inf_bh) b \
           ON t.source = b.source AND t.arm = b.arm \
         WHERE t.splits IS NOT NULL ORDER BY t.source, t.model, t.test, t.dimension"
        .to_string();
    // The group columns (a subset of arm, cohort) are columns of `ctest` too.
    let q = Binds::default();
    let g = grouped(p, "ctest", "splits IS NOT NULL", &q);
    let (keys, order) = group_keys(p);
    let by_group = q.sql(format!(
        "SELECT source, label, grp AS \"group\", cells, p_le_0_05, get_field(b, 'count') AS bh_rejected FROM ( \
           SELECT source, {keys}, grp, {LABEL}, COUNT(*) AS cells, \
             SUM(CASE WHEN at_least * 20 <= splits THEN 1 ELSE 0 END) AS p_le_0_05, {bh_of} AS b \
           FROM {g} GROUP BY source, {keys}, grp) ORDER BY source, \"group\", {order}"
    ));
    let headline = format!(
        "SELECT source, label, arm, get_field(h, 'models') AS models, compared_cells, protocol_gt_sampling, \
           get_field(h, 'share') AS share, get_field(h, 'share_low') AS share_low, get_field(h, 'share_high') AS share_high, ratio_cells, \
           get_field(h, 'median_ratio') AS median_ratio, get_field(h, 'median_ratio_low') AS median_ratio_low, \
           get_field(h, 'median_ratio_high') AS median_ratio_high, get_field(h, 'null_expected_share') AS null_expected_share, \
           get_field(h, 'replicates') AS replicates, CAST({seed} AS BIGINT) AS seed FROM inf_headline \
         ORDER BY source",
        seed = protospread_inference::BOOTSTRAP_SEED as i64,
    );
    let headline_cells = "ctest t JOIN headline hl ON t.source = hl.source AND t.arm = hl.arm";
    let headline_h = Step::Groups {
        sql: format!(
            "SELECT t.source, named_struct('model', t.model, 'gt', t.protocol_gt_sampling, \
               'ratio', t.ratio, 'null_gt', t.null_gt, 'splits', t.splits) AS item \
             FROM {headline_cells} \
             ORDER BY t.source NULLS LAST, t.model, t.test, t.dimension, t.cohort"
        )
        .into(),
        keys: 1,
        function: HEADLINE,
    };
    let headline_counts = format!(
        "SELECT c.*, g.h FROM ( \
           SELECT t.source, first_value(t.label ORDER BY t.model, t.test, t.dimension) AS label, \
             MIN(hl.arm) AS arm, COUNT(t.protocol_gt_sampling) AS compared_cells, \
             SUM(CASE WHEN t.protocol_gt_sampling THEN 1 ELSE 0 END) AS protocol_gt_sampling, \
             COUNT(t.ratio) AS ratio_cells \
           FROM {headline_cells} GROUP BY t.source) c \
         JOIN inf_headline_h g ON c.source IS NOT DISTINCT FROM g.source"
    );
    let error_bars = "SELECT source, label, model, arm, cohort, test, dimension, protocol_n, \
           protocol_mean_z AS mean_z, lowest AS lowest_setups, min_z AS lowest_z, \
           highest AS highest_setups, max_z AS highest_z, protocol_sd, sampling_sd, \
           CASE WHEN sampling_sd IS NULL OR protocol_gt_sampling THEN protocol_sd ELSE sampling_sd END AS error_bar, \
           CASE WHEN sampling_sd IS NULL OR protocol_gt_sampling THEN 'protocol' ELSE 'sampling' END AS error_bar_from \
         FROM ctest ORDER BY source, model, test, dimension"
        .to_string();
    let ranking = "SELECT source, label, arm, test, dimension, get_field(r, 'setups') AS setups, get_field(r, 'models') AS models, \
           get_field(r, 'setup_pairs') AS setup_pairs, get_field(r, 'tau_median') AS tau_median, get_field(r, 'tau_min') AS tau_min, \
           get_field(r, 'model_pairs') AS model_pairs, get_field(r, 'flipped_pairs') AS flipped_pairs, \
           CASE WHEN get_field(r, 'model_pairs') > 0 THEN CAST(get_field(r, 'flipped_pairs') AS DOUBLE) / CAST(get_field(r, 'model_pairs') AS DOUBLE) END \
             AS flipped_share, \
           get_field(r, 'leaders') AS leaders, get_field(r, 'leading_models') AS leading_models, \
           get_field(r, 'leaders') = get_field(r, 'models') AS every_model_can_lead FROM inf_ranking \
         ORDER BY source, arm, test, dimension"
        .to_string();
    // The label carried is the group's first row's, the first in order of models.
    let ranking_r = Step::Groups {
        sql: "SELECT source, arm, test, dimension, label, named_struct('model', model, 'pl', pl) AS item \
              FROM ctest ORDER BY source NULLS LAST, arm NULLS LAST, test NULLS LAST, \
                dimension NULLS LAST, model, label, cohort"
            .into(),
        keys: 4,
        function: RANKING_OF,
    };
    let bh = format!(
        "SELECT source, arm, {bh_of} AS x FROM ctest WHERE splits IS NOT NULL GROUP BY source, arm"
    );
    Inference {
        intermediate: vec![
            ("cinf", Step::Plan(cinf.into())),
            ("ctest", Step::Plan(ctest.into())),
            ("inf_bh", Step::Plan(bh.into())),
            ("inf_headline_h", headline_h),
            ("inf_headline", Step::Plan(headline_counts.into())),
            ("inf_ranking", ranking_r),
        ],
        tables: vec![
            ("cell_tests", cell_tests.into()),
            ("cell_tests_by_group", by_group),
            ("headline_interval", headline.into()),
            ("error_bars", error_bars.into()),
            ("ranking", ranking.into()),
        ],
    }
}
