//! Human norms: per test and dimension, the distribution of human scores.
//!
//! - Rows: the human rows the current key reproduces exactly (rows scored by an older key or
//!   inconsistent rows are left out: their answers may not mean what the current key assumes),
//!   minus every row whose whole answer vector equals that of a reproduced row with a lower
//!   `id` (repeat submissions would count one person twice). See docs/norms.md.
//! - SD: the sample SD (divisor n - 1).
//! - Percentile: mid-rank, `100 * (below + 0.5 * equal) / n`.
//! - z: `(value - mean) / sd`; infinite or NaN when sd is 0.

use crate::human::column;
use crate::ScoreError;
use arrow::array::{Array, Float64Array, Int64Array, StringArray};
use protospread_core::NORM_VALUES;
use std::collections::BTreeMap;
use std::path::Path;

/// The norm of one dimension.
///
/// The human values are kept as distinct values with their counts, so a norm holds one entry
/// per distinct score (at most 101 on a percent scale), however many human rows it has.
#[derive(Debug, Clone, PartialEq)]
pub struct Norm {
    /// Test name.
    pub test: String,
    /// Dimension (scale).
    pub dimension: String,
    /// Human rows.
    pub n: usize,
    /// Mean human score.
    pub mean: f64,
    /// Sample SD, divisor n - 1.
    pub sd: f64,
    /// The distinct human values, ascending, each with how many rows have it.
    pub values: Vec<(f64, usize)>,
    /// `below[i]`: rows with a value below `values[i].0`.
    below: Vec<usize>,
}

/// An f64 ordered by `total_cmp`, for counting values in a `BTreeMap`.
#[derive(Debug, Clone, Copy)]
struct Total(f64);

impl PartialEq for Total {
    fn eq(&self, o: &Self) -> bool {
        self.0.total_cmp(&o.0).is_eq()
    }
}
impl Eq for Total {}
impl PartialOrd for Total {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Total {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Counts of values, in `total_cmp` order: what [`Norm::from_counts`] takes.
#[derive(Debug, Clone, Default)]
pub struct ValueCounts(BTreeMap<Total, usize>);

impl ValueCounts {
    /// Count `v` once more.
    pub fn add(&mut self, v: f64) {
        *self.0.entry(Total(v)).or_insert(0) += 1;
    }

    /// Count `v` `count` times more.
    pub fn add_n(&mut self, v: f64, count: usize) {
        *self.0.entry(Total(v)).or_insert(0) += count;
    }
}

impl Norm {
    /// Build from values (any order).
    pub fn from_values(test: &str, dimension: &str, values: Vec<f64>) -> Norm {
        let mut c = ValueCounts::default();
        values.into_iter().for_each(|v| c.add(v));
        Norm::from_counts(test, dimension, c)
    }

    /// Build from counted values. Mean and SD are summed over the values in ascending order,
    /// each value added as many times as it occurs, so the result is bit for bit that of
    /// summing the sorted list of values, and does not depend on the input order.
    pub fn from_counts(test: &str, dimension: &str, counts: ValueCounts) -> Norm {
        // Distinct values are those `==` tells apart (as a sorted list grouped by `==`
        // would give): -0.0 joins 0.0 under the first seen, and each NaN stands alone.
        let mut values: Vec<(f64, usize)> = Vec::new();
        for (Total(v), c) in counts.0 {
            match values.last_mut() {
                Some(last) if last.0 == v => last.1 += c,
                _ if v.is_nan() => values.extend(std::iter::repeat_n((v, 1), c)),
                _ => values.push((v, c)),
            }
        }
        let n: usize = values.iter().map(|(_, c)| c).sum();
        let each = || values.iter().flat_map(|&(v, c)| std::iter::repeat_n(v, c));
        let mean = each().sum::<f64>() / n as f64;
        let ss: f64 = each().map(|v| (v - mean) * (v - mean)).sum();
        let sd = if n > 1 {
            (ss / (n - 1) as f64).sqrt()
        } else {
            f64::NAN
        };
        let mut below = Vec::with_capacity(values.len());
        let mut acc = 0;
        for (_, c) in &values {
            below.push(acc);
            acc += c;
        }
        Norm {
            test: test.into(),
            dimension: dimension.into(),
            n,
            mean,
            sd,
            values,
            below,
        }
    }

    /// Mid-rank percentile of `value` among the human values: `100 * (below + 0.5 * equal) / n`.
    pub fn percentile(&self, value: f64) -> f64 {
        let i = self.values.partition_point(|(v, _)| *v < value);
        let j = self.values.partition_point(|(v, _)| *v <= value);
        let below = self.below.get(i).copied().unwrap_or(self.n);
        let upto = self.below.get(j).copied().unwrap_or(self.n);
        100.0 * (below as f64 + 0.5 * (upto - below) as f64) / self.n as f64
    }

    /// Distance from the human mean in human SDs.
    pub fn z(&self, value: f64) -> f64 {
        (value - self.mean) / self.sd
    }

    /// Lowest human value.
    pub fn min(&self) -> f64 {
        self.values[0].0
    }

    /// Highest human value.
    pub fn max(&self) -> f64 {
        self.values[self.values.len() - 1].0
    }

    /// The `k`-th value (0-based) of the sorted list of human values.
    fn nth(&self, k: usize) -> f64 {
        let i = self.below.partition_point(|b| *b <= k);
        self.values[i - 1].0
    }

    /// Median (mean of the two middle values for even n).
    pub fn median(&self) -> f64 {
        let m = self.n / 2;
        if self.n % 2 == 1 {
            self.nth(m)
        } else {
            (self.nth(m - 1) + self.nth(m)) / 2.0
        }
    }
}

/// Norms of every (test, dimension).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Norms {
    /// Norm by (test, dimension).
    pub norms: BTreeMap<(String, String), Norm>,
}

impl Norms {
    /// Build from (test, dimension, value) triples of the norm rows.
    pub fn from_scores<'a>(scores: impl IntoIterator<Item = (&'a str, &'a str, f64)>) -> Norms {
        let mut by: BTreeMap<(String, String), ValueCounts> = BTreeMap::new();
        for (t, d, v) in scores {
            by.entry((t.to_string(), d.to_string())).or_default().add(v);
        }
        Norms::from_counts(by)
    }

    /// Build from counted values per (test, dimension).
    pub fn from_counts(by: BTreeMap<(String, String), ValueCounts>) -> Norms {
        Norms {
            norms: by
                .into_iter()
                .map(|((t, d), c)| {
                    let n = Norm::from_counts(&t, &d, c);
                    ((t, d), n)
                })
                .collect(),
        }
    }

    /// The norm of a test's dimension.
    pub fn get(&self, test: &str, dim: &str) -> Option<&Norm> {
        self.norms.get(&(test.to_string(), dim.to_string()))
    }

    /// The norms of a test's dimensions, by dimension name.
    pub(crate) fn of_test<'a>(
        &'a self,
        test: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a Norm)> {
        self.norms
            .iter()
            .filter(move |((t, _), _)| t == test)
            .map(|((_, d), n)| (d.as_str(), n))
    }

    /// Load from the score stage's output folder (`out/score`), reading `norm_values.parquet`
    /// ([`NORM_VALUES`]: test, dimension, value, count) and recomputing mean and SD exactly as
    /// [`Norm::from_values`] does.
    pub fn load(dir: &Path) -> Result<Norms, ScoreError> {
        let path = dir.join(NORM_VALUES.file_name());
        let (schema, batches) = protospread_core::read_parquet(&path)?;
        NORM_VALUES
            .check_schema(&schema)
            .map_err(|source| ScoreError::Contract {
                path: path.clone(),
                source,
            })?;
        let mut by: BTreeMap<(String, String), ValueCounts> = BTreeMap::new();
        for b in &batches {
            let t = column::<StringArray>(b, &path, "test")?;
            let d = column::<StringArray>(b, &path, "dimension")?;
            let v = column::<Float64Array>(b, &path, "value")?;
            let c = column::<Int64Array>(b, &path, "count")?;
            for i in 0..b.num_rows() {
                if t.is_null(i) || d.is_null(i) || v.is_null(i) || c.is_null(i) || c.value(i) < 1 {
                    return Err(ScoreError::file(
                        &path,
                        format!("row {}: empty cell or count < 1", i + 1),
                    ));
                }
                by.entry((t.value(i).to_string(), d.value(i).to_string()))
                    .or_default()
                    .add_n(v.value(i), c.value(i) as usize);
            }
        }
        Ok(Norms::from_counts(by))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_mid_rank_and_sd() {
        let n = Norm::from_values("t", "d", vec![3.0, 1.0, 2.0, 2.0]);
        assert_eq!(n.percentile(2.0), 50.0); // (1 + 0.5*2)/4
        assert_eq!(n.percentile(0.0), 0.0);
        assert_eq!(n.percentile(9.0), 100.0);
        assert_eq!(n.mean, 2.0);
        assert!((n.sd - (2.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!(n.median(), 2.0);
    }
}
