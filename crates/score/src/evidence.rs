//! Evidence for the rule: the alternatives the data rejects, counted.
//!
//! Each alternative changes one aspect of the product rule (rounding, arithmetic order,
//! out-of-range answers, tie order, Big Five N direction) and counts the human rows it
//! reproduces exactly with the current key. `protospread score --evidence` prints the table;
//! docs/scoring-key.md quotes it.

use crate::human::HumanRow;
use crate::key::{ScoringKey, TestKey, Unit};
use crate::stage::HumanInput;
use crate::ScoreError;
use protospread_core::Instrument;

/// How a dimension's points become its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// `round_half_up(points / max * 100)` (the product).
    DivThenMulHalfUp,
    /// `round_half_up(points * 100 / max)`.
    MulThenDivHalfUp,
    /// `round_half_even(points / max * 100)`.
    HalfEven,
    /// `floor(points / max * 100)`.
    Floor,
    /// `ceil(points / max * 100)`.
    Ceil,
}

/// What an answer outside the scale counts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfRange {
    /// 0 points, maximum unchanged (the product).
    Zero,
    /// Clamped into the scale.
    Clamp,
    /// Counted as given.
    AsIs,
    /// Skipped: 0 points and the item's maximum left out of the dimension's maximum.
    Skip,
}

/// Which dimension wins a tie for `top_result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieOrder {
    /// The key's `tie_rank` (the product).
    KeyRank,
    /// The order of the `score_<dim>` columns in the data.
    ColumnOrder,
    /// The order in which dimensions first appear in the item list.
    ItemOrder,
}

/// One variant of the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoringRule {
    /// How fractional scores are rounded.
    pub rounding: Rounding,
    /// What happens to values outside the scale.
    pub out_of_range: OutOfRange,
    /// How ties between dimensions are broken.
    pub ties: TieOrder,
    /// Flip the reverse flag of every item of Big Five `N` (N as Emotional Stability).
    pub big_five_n_as_stability: bool,
}

impl ScoringRule {
    /// The product's rule.
    pub const PRODUCT: ScoringRule = ScoringRule {
        rounding: Rounding::DivThenMulHalfUp,
        out_of_range: OutOfRange::Zero,
        ties: TieOrder::KeyRank,
        big_five_n_as_stability: false,
    };
}

/// Score one answer vector under `rule`: (values in dimension order, top_result).
/// A straightforward re-implementation, independent of [`crate::score`].
pub fn score_with_rule(tk: &TestKey, answers: &[u8], rule: ScoringRule) -> (Vec<f64>, String) {
    let mut values = Vec::new();
    for (d, dr) in tk.dims.iter().enumerate() {
        let mut pts = 0.0;
        let mut max = 0.0;
        for (it, &a) in tk.items.iter().zip(answers) {
            if it.dim != d {
                continue;
            }
            let flip = rule.big_five_n_as_stability && tk.test == "big_five" && dr.name == "N";
            let rev = it.reverse != flip;
            let width = f64::from(it.scale_max - it.scale_min) * it.weight;
            let inside = a >= it.scale_min && a <= it.scale_max;
            let a = match rule.out_of_range {
                _ if inside => Some(a),
                OutOfRange::Zero => None,
                OutOfRange::Clamp => Some(a.clamp(it.scale_min, it.scale_max)),
                OutOfRange::AsIs => Some(a),
                OutOfRange::Skip => None,
            };
            if inside || rule.out_of_range != OutOfRange::Skip {
                max += width;
            }
            if let Some(a) = a {
                let p = if rev {
                    f64::from(it.scale_max) - f64::from(a)
                } else {
                    f64::from(a) - f64::from(it.scale_min)
                };
                pts += p * it.weight;
            }
        }
        let max = dr.max_points.unwrap_or(max);
        let v = match rule.rounding {
            Rounding::DivThenMulHalfUp => (pts / max * 100.0 + 0.5).floor(),
            Rounding::MulThenDivHalfUp => (pts * 100.0 / max + 0.5).floor(),
            Rounding::HalfEven => (pts / max * 100.0).round_ties_even(),
            Rounding::Floor => (pts / max * 100.0).floor(),
            Rounding::Ceil => (pts / max * 100.0).ceil(),
        };
        values.push(if tk.unit == Unit::Raw { pts } else { v });
    }
    let rank = |d: usize| -> usize {
        match rule.ties {
            TieOrder::KeyRank => tk.dims[d].tie_rank as usize,
            TieOrder::ColumnOrder => d,
            TieOrder::ItemOrder => tk
                .items
                .iter()
                .position(|it| it.dim == d)
                .unwrap_or(usize::MAX),
        }
    };
    let mut order: Vec<usize> = (0..values.len()).collect();
    // A plain selection: repeatedly take the best remaining dimension.
    let mut top = String::new();
    for _ in 0..tk.top_n {
        let mut best = order[0];
        for &d in &order[1..] {
            if values[d] > values[best] || (values[d] == values[best] && rank(d) < rank(best)) {
                best = d;
            }
        }
        top.push_str(&tk.dims[best].name);
        order.retain(|&d| d != best);
    }
    (values, top)
}

/// Rows of `rows` reproduced exactly (every score and top_result) under `rule`.
pub fn count_reproduced_under(
    key: &ScoringKey,
    inst: &Instrument,
    rows: &[HumanRow],
    rule: ScoringRule,
) -> usize {
    let Some(tk) = key.test(inst.name) else {
        return 0;
    };
    rows.iter()
        .filter(|r| {
            let (v, top) = score_with_rule(tk, &r.answers, rule);
            top == r.top_result && v.iter().zip(&r.scores).all(|(a, &b)| *a == f64::from(b))
        })
        .count()
}

/// The alternatives compared in the evidence table: (aspect, variant name, rule).
pub fn alternative_rules() -> Vec<(&'static str, &'static str, ScoringRule)> {
    let p = ScoringRule::PRODUCT;
    vec![
        ("product rule", "as recovered", p),
        (
            "rounding",
            "round_half_up(points*100/max)",
            ScoringRule {
                rounding: Rounding::MulThenDivHalfUp,
                ..p
            },
        ),
        (
            "rounding",
            "round_half_even(points/max*100)",
            ScoringRule {
                rounding: Rounding::HalfEven,
                ..p
            },
        ),
        (
            "rounding",
            "floor(points/max*100)",
            ScoringRule {
                rounding: Rounding::Floor,
                ..p
            },
        ),
        (
            "rounding",
            "ceil(points/max*100)",
            ScoringRule {
                rounding: Rounding::Ceil,
                ..p
            },
        ),
        (
            "out-of-range answer",
            "clamped into 0..4",
            ScoringRule {
                out_of_range: OutOfRange::Clamp,
                ..p
            },
        ),
        (
            "out-of-range answer",
            "counted as given",
            ScoringRule {
                out_of_range: OutOfRange::AsIs,
                ..p
            },
        ),
        (
            "out-of-range answer",
            "skipped, maximum reduced",
            ScoringRule {
                out_of_range: OutOfRange::Skip,
                ..p
            },
        ),
        (
            "top_result ties",
            "score column order",
            ScoringRule {
                ties: TieOrder::ColumnOrder,
                ..p
            },
        ),
        (
            "top_result ties",
            "first item order",
            ScoringRule {
                ties: TieOrder::ItemOrder,
                ..p
            },
        ),
        (
            "Big Five N",
            "Emotional Stability (N items reversed)",
            ScoringRule {
                big_five_n_as_stability: true,
                ..p
            },
        ),
    ]
}

/// One alternative of [`alternative_rules`] and the rows it reproduces per instrument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceRow {
    /// The aspect of the rule that is changed ("rounding", "ties"...).
    pub aspect: &'static str,
    /// The variant of that aspect.
    pub variant: &'static str,
    /// Per instrument, in the order of the inputs.
    pub counts: Vec<EvidenceCount>,
}

/// Rows of one instrument reproduced exactly under one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceCount {
    /// Instrument name.
    pub instrument: String,
    /// Rows reproduced exactly (every score and top_result).
    pub reproduced: usize,
    /// Rows of the instrument.
    pub rows: usize,
}

/// The evidence table of `score --evidence`: one row per alternative rule, the product's
/// rule first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// The instruments of the inputs, in their order (the columns of the table).
    pub instruments: Vec<&'static str>,
    /// One row per alternative of [`alternative_rules`], in that order.
    pub rows: Vec<EvidenceRow>,
}

impl Evidence {
    /// The table as JSON: one object per rule with its reproduced rows per instrument.
    pub fn to_json(&self) -> serde_json::Value {
        let v: Vec<_> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({"aspect": r.aspect, "variant": r.variant,
                    "reproduced": r.counts.iter().map(|c| serde_json::json!({"instrument": c.instrument, "rows": c.reproduced, "of": c.rows})).collect::<Vec<_>>()})
            })
            .collect();
        serde_json::Value::Array(v)
    }
}

/// Count, for every rule of [`alternative_rules`], the rows of every input the current `key`
/// reproduces exactly under it. Reads every row of every input into memory.
pub fn evidence_table(key: &ScoringKey, inputs: &[HumanInput]) -> Result<Evidence, ScoreError> {
    let loaded = inputs
        .iter()
        .map(|i| Ok((i.inst, i.rows()?)))
        .collect::<Result<Vec<_>, ScoreError>>()?;
    let rows = alternative_rules()
        .into_iter()
        .map(|(aspect, variant, rule)| EvidenceRow {
            aspect,
            variant,
            counts: loaded
                .iter()
                .map(|(inst, r)| EvidenceCount {
                    instrument: inst.name.to_string(),
                    reproduced: count_reproduced_under(key, inst, r, rule),
                    rows: r.len(),
                })
                .collect(),
        })
        .collect();
    Ok(Evidence {
        instruments: inputs.iter().map(|i| i.inst.name).collect(),
        rows,
    })
}
