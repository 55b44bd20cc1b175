//! The scorer: one answer vector to per-dimension scores, exactly as the product computes them.
//!
//! The rule (recovered from the human data, see docs/scoring-key.md):
//! - an item earns `weight * (answer - scale_min)`, or `weight * (scale_max - answer)` when
//!   reversed;
//! - an answer outside `scale_min..=scale_max` (the human data holds some 5s and 6s) earns 0
//!   points and the dimension's maximum is unchanged;
//! - the value is `round(points / max_points * 100)` in f64 arithmetic, in that order
//!   (divide, then multiply), rounding half away from zero (all values are >= 0, so this is
//!   JavaScript's `Math.round`); `23 / 40 * 100` is `57.49999999999999` and gives 57;
//! - `top_result` names the `top_n` dimensions with the highest values, ties going to the
//!   lower `tie_rank`, concatenated without separator.

use crate::key::{KeyItem, ScoringKey, TestKey, Unit};
use crate::ScoreError;

/// Points item `it` earns for the 0-based answer `v`: `weight * (v - scale_min)`, or
/// `weight * (scale_max - v)` when reversed; 0 for an answer outside the scale.
pub(crate) fn item_points(it: &KeyItem, v: u8) -> f64 {
    if !(it.scale_min..=it.scale_max).contains(&v) {
        return 0.0;
    }
    let p = if it.reverse {
        it.scale_max - v
    } else {
        v - it.scale_min
    };
    it.weight * f64::from(p)
}

/// The maximum points of dimension `d` of `tk`: its `max_points` override, else the sum of
/// `weight * (scale_max - scale_min)` over its items in item order.
pub(crate) fn dim_max(tk: &TestKey, d: usize) -> f64 {
    let mut max = 0.0f64;
    for it in tk.items.iter().filter(|it| it.dim == d) {
        max += it.weight * f64::from(it.scale_max - it.scale_min);
    }
    tk.dims[d].max_points.unwrap_or(max)
}

/// Percent of the maximum, rounded half away from zero: divide, then multiply, in f64.
pub(crate) fn percent_of_max(points: f64, max: f64) -> f64 {
    (points / max * 100.0).round()
}

/// The stored value of a complete dimension: the points for raw-unit keys, else
/// [`percent_of_max`].
pub(crate) fn scale_value(points: f64, max: f64, raw_unit: bool) -> f64 {
    if raw_unit {
        points
    } else {
        percent_of_max(points, max)
    }
}

/// The score of one dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct DimScore {
    /// Dimension name.
    pub dimension: String,
    /// The product's stored value (an integer held in f64); `None` when any item of the
    /// dimension is missing.
    pub value: Option<f64>,
    /// Percent of the maximum, rounded as `value` is; equals `value` for percent-unit keys.
    /// (Only the oldest RIASEC version stored raw sums with percents beside them.)
    pub percent: Option<f64>,
    /// Items of the dimension in the key.
    pub n_items: usize,
    /// Items with an answer (in range or not).
    pub n_answered: usize,
}

/// All dimensions of one answer vector, in the instrument's column order.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleScores {
    /// Every dimension of the test, in key order.
    pub dims: Vec<DimScore>,
    /// `None` when any dimension has no value.
    pub top_result: Option<String>,
}

/// One dimension's score, without its name: what [`score`] computes for each dimension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DimValue {
    pub(crate) value: Option<f64>,
    pub(crate) percent: Option<f64>,
    pub(crate) n_items: usize,
    pub(crate) n_answered: usize,
}

/// Dimension `d` of `tk` for `answers` (one per item of `tk`, in item order): the one place
/// the rule above is applied. A change of one item's key row changes only its own dimension,
/// so the mutation check rescores just that dimension through this function.
pub(crate) fn score_dim(tk: &TestKey, d: usize, answers: &[Option<u8>]) -> DimValue {
    let (mut points, mut n_items, mut n_answered) = (0.0f64, 0, 0);
    for (it, a) in tk.items.iter().zip(answers).filter(|(it, _)| it.dim == d) {
        n_items += 1;
        let Some(v) = *a else { continue };
        n_answered += 1;
        points += item_points(it, v);
    }
    let complete = n_answered == n_items;
    let max = dim_max(tk, d);
    DimValue {
        value: complete.then(|| scale_value(points, max, tk.unit == Unit::Raw)),
        percent: complete.then(|| percent_of_max(points, max)),
        n_items,
        n_answered,
    }
}

/// Score `answers` (0-based human-scale values in item order, `None` = missing) for `test`.
pub fn score(
    key: &ScoringKey,
    test: &str,
    answers: &[Option<u8>],
) -> Result<ScaleScores, ScoreError> {
    let err = |m: String| ScoreError::Score {
        test: test.to_string(),
        message: m,
    };
    let tk = key
        .test(test)
        .ok_or_else(|| err(format!("key version {} has no such test", key.version)))?;
    if answers.len() != tk.items.len() {
        return Err(err(format!(
            "{} answers for {} items",
            answers.len(),
            tk.items.len()
        )));
    }
    let mut dims = Vec::with_capacity(tk.dims.len());
    for (d, rule) in tk.dims.iter().enumerate() {
        let s = score_dim(tk, d, answers);
        dims.push(DimScore {
            dimension: rule.name.clone(),
            value: s.value,
            percent: s.percent,
            n_items: s.n_items,
            n_answered: s.n_answered,
        });
    }
    let values: Option<Vec<f64>> = dims.iter().map(|d| d.value).collect();
    let top_result = values.map(|v| {
        let mut order: Vec<usize> = (0..v.len()).collect();
        order.sort_by(|&a, &b| {
            v[b].total_cmp(&v[a])
                .then(tk.dims[a].tie_rank.cmp(&tk.dims[b].tie_rank))
        });
        order[..tk.top_n]
            .iter()
            .map(|&i| tk.dims[i].name.as_str())
            .collect::<String>()
    });
    Ok(ScaleScores { dims, top_result })
}
