//! Human norms: per test and dimension, the distribution of human scores.
//!
//! - Rows: the human rows the current key reproduces exactly (rows scored by an older key or
//!   inconsistent rows are left out: their answers may not mean what the current key assumes),
//!   minus every row whose whole answer vector equals that of a reproduced row with a lower
//!   `id` (repeat submissions would count one person twice). See docs/norms.md.
//! - SD: the sample SD (divisor n - 1).
//! - Percentile: mid-rank, `100 * (below + 0.5 * equal) / n`.
//! - z: `(value - mean) / sd`; infinite or NaN when sd is 0.

use crate::ScoreError;
use arrow::array::{Array, Float64Array, Int64Array, StringArray};
use std::collections::BTreeMap;
use std::path::Path;

/// The norm of one dimension.
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
    /// The human values, sorted ascending.
    pub values: Vec<f64>,
}

impl Norm {
    /// Build from values (any order). Mean and SD are summed in ascending order so the result
    /// does not depend on the input order.
    pub fn from_values(test: &str, dimension: &str, mut values: Vec<f64>) -> Norm {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
        let sd = if n > 1 {
            (ss / (n - 1) as f64).sqrt()
        } else {
            f64::NAN
        };
        Norm {
            test: test.into(),
            dimension: dimension.into(),
            n,
            mean,
            sd,
            values,
        }
    }

    /// Mid-rank percentile of `value` among the human values: `100 * (below + 0.5 * equal) / n`.
    pub fn percentile(&self, value: f64) -> f64 {
        let below = self.values.partition_point(|v| *v < value);
        let upto = self.values.partition_point(|v| *v <= value);
        100.0 * (below as f64 + 0.5 * (upto - below) as f64) / self.n as f64
    }

    /// Distance from the human mean in human SDs.
    pub fn z(&self, value: f64) -> f64 {
        (value - self.mean) / self.sd
    }

    /// Lowest possible score of the scale.
    pub fn min(&self) -> f64 {
        self.values[0]
    }

    /// Highest possible score of the scale.
    pub fn max(&self) -> f64 {
        self.values[self.n - 1]
    }

    /// Median (mean of the two middle values for even n).
    pub fn median(&self) -> f64 {
        let m = self.n / 2;
        if self.n % 2 == 1 {
            self.values[m]
        } else {
            (self.values[m - 1] + self.values[m]) / 2.0
        }
    }
}

/// Norms of every (test, dimension).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Norms {
    /// Norm by (test, dimension).
    pub norms: BTreeMap<(String, String), Norm>,
}

/// File name of the per-value table `Norms::load` reads.
pub const VALUES_FILE: &str = "norm_values.parquet";

impl Norms {
    /// Build from (test, dimension, value) triples of the norm rows.
    pub fn from_scores<'a>(scores: impl IntoIterator<Item = (&'a str, &'a str, f64)>) -> Norms {
        let mut by: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for (t, d, v) in scores {
            by.entry((t.to_string(), d.to_string()))
                .or_default()
                .push(v);
        }
        Norms {
            norms: by
                .into_iter()
                .map(|((t, d), v)| {
                    let n = Norm::from_values(&t, &d, v);
                    ((t, d), n)
                })
                .collect(),
        }
    }

    /// The norm of a test's dimension.
    pub fn get(&self, test: &str, dim: &str) -> Option<&Norm> {
        self.norms.get(&(test.to_string(), dim.to_string()))
    }

    /// Load from the score stage's output folder (`out/score`), reading `norm_values.parquet`
    /// (columns test, dimension, value, count) and recomputing mean and SD exactly as
    /// [`Norm::from_values`] does.
    pub fn load(dir: &Path) -> Result<Norms, ScoreError> {
        let path = dir.join(VALUES_FILE);
        let (_, batches) = protospread_core::pq::read(&path)?;
        let mut triples: Vec<(String, String, f64)> = Vec::new();
        for b in &batches {
            let col = |n: &str| {
                b.column_by_name(n)
                    .cloned()
                    .ok_or_else(|| ScoreError::file(&path, format!("missing column {n}")))
            };
            let (t, d, v, c) = (
                col("test")?,
                col("dimension")?,
                col("value")?,
                col("count")?,
            );
            let wrong = |n: &str| ScoreError::file(&path, format!("column {n} has the wrong type"));
            let t = t
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| wrong("test"))?;
            let d = d
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| wrong("dimension"))?;
            let v = v
                .as_any()
                .downcast_ref::<Float64Array>()
                .ok_or_else(|| wrong("value"))?;
            let c = c
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| wrong("count"))?;
            for i in 0..b.num_rows() {
                if t.is_null(i) || d.is_null(i) || v.is_null(i) || c.is_null(i) || c.value(i) < 1 {
                    return Err(ScoreError::file(
                        &path,
                        format!("row {}: empty cell or count < 1", i + 1),
                    ));
                }
                for _ in 0..c.value(i) {
                    triples.push((t.value(i).to_string(), d.value(i).to_string(), v.value(i)));
                }
            }
        }
        Ok(Norms::from_scores(
            triples.iter().map(|(t, d, v)| (t.as_str(), d.as_str(), *v)),
        ))
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
