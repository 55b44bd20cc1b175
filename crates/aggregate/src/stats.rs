//! Every formula of the stage, computed from exact integer moments (`crate::functions` makes
//! them DataFusion scalar functions).
//!
//! A scale score is an integer 0..100, so a cell's statistics come from integer moments of its
//! scores (count `n`, sum `s`, sum of squares `q`, all `i64`) summed by DataFusion in any order
//! and any partitioning with the same result. Floats appear once, at the end, when a moment is
//! converted to human SDs with the scale's human mean and SD. The conventions are stated in
//! docs/statistics.md and must stay in sync with it.

// One exact fraction comparison for the cell tables and the permutation test, so both call a
// tie the same way.
use protospread_inference::fraction_gt as frac_gt;

/// Integer moments of a set of scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moments {
    /// Number of scores.
    pub n: i64,
    /// Sum of the scores.
    pub sum: i64,
    /// Sum of the squared scores.
    pub sumsq: i64,
}

impl Moments {
    /// `n * q - s^2 = n^2 * (population variance)`: exact, and 0 exactly when all scores are equal.
    pub fn dev(&self) -> i128 {
        i128::from(self.n) * i128::from(self.sumsq) - i128::from(self.sum) * i128::from(self.sum)
    }

    /// `n (n - 1)`: with [`Moments::dev`], the sample variance is `dev / (n (n - 1))`.
    fn den(&self) -> i128 {
        i128::from(self.n) * i128::from(self.n - 1)
    }

    /// Sample variance (divisor n - 1) in score units squared, converted once; `None` for
    /// fewer than two scores.
    pub fn variance(&self) -> Option<f64> {
        (self.n >= 2).then(|| self.dev() as f64 / self.den() as f64)
    }
}

/// Sample SD (divisor n - 1) in human SDs: `sqrt(dev / (n (n - 1))) / human_sd`. Exactly 0 when
/// all scores are equal. `None` for fewer than two scores.
pub fn sd_z(m: Moments, human_sd: f64) -> Option<f64> {
    Some(m.variance()?.sqrt() / human_sd)
}

/// Mean in human SDs from the human mean: `(s / n - human_mean) / human_sd`.
pub fn mean_z(n: i64, sum: i64, human_mean: f64, human_sd: f64) -> Option<f64> {
    (n > 0).then(|| (sum as f64 / n as f64 - human_mean) / human_sd)
}

/// A score in human SDs: `(x - human_mean) / human_sd`.
pub fn z(x: i64, human_mean: f64, human_sd: f64) -> f64 {
    (x as f64 - human_mean) / human_sd
}

/// A difference of scores in human SDs: `d / human_sd` (ranges and rerun differences).
pub fn diff_z(d: i64, human_sd: f64) -> f64 {
    d as f64 / human_sd
}

/// "protocol SD > sampling SD": the two sample variances compared as exact fractions
/// `dev_p / (n_p (n_p - 1)) > dev_s / (n_s (n_s - 1))`, so equal variances are a tie (not
/// exceeding) whatever the float rounding. `None` unless both have two or more scores.
pub fn variance_gt(p: Moments, s: Moments) -> Option<bool> {
    if p.n < 2 || s.n < 2 {
        return None;
    }
    let u = |x: i128| u128::try_from(x).unwrap_or(0);
    Some(frac_gt(u(p.dev()), u(p.den()), u(s.dev()), u(s.den())))
}

/// How the ratio protocol SD / sampling SD was formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioRule {
    /// Sampling SD > 0: the plain quotient.
    Quotient,
    /// Sampling SD = 0 and protocol SD > 0: the ratio is +infinity.
    SamplingZero,
    /// Both SDs are 0: the ratio is undefined (no value) and the cell does not count as
    /// protocol SD > sampling SD.
    BothZero,
}

impl RatioRule {
    /// Name written to the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            RatioRule::Quotient => "quotient",
            RatioRule::SamplingZero => "sampling_sd_zero",
            RatioRule::BothZero => "both_zero",
        }
    }
}

/// Ratio protocol SD / sampling SD = `sqrt(var_p / var_s)` (the human SD cancels), with the
/// explicit rule for a zero sampling SD. `None` unless both have two or more scores.
pub fn ratio(p: Moments, s: Moments) -> Option<(Option<f64>, RatioRule)> {
    let (vp, vs) = (p.variance()?, s.variance()?);
    Some(if s.dev() > 0 {
        (Some((vp / vs).sqrt()), RatioRule::Quotient)
    } else if p.dev() > 0 {
        (Some(f64::INFINITY), RatioRule::SamplingZero)
    } else {
        (None, RatioRule::BothZero)
    })
}

/// Protocol shift in human SDs: mean over `to` minus mean over `from`, from the exact numerator
/// `s_to n_from - s_from n_to` over `n_to n_from`. Exactly 0 when the two means are equal.
pub fn shift_z(n_to: i64, s_to: i64, n_from: i64, s_from: i64, human_sd: f64) -> Option<f64> {
    if n_to == 0 || n_from == 0 {
        return None;
    }
    let num = i128::from(s_to) * i128::from(n_from) - i128::from(s_from) * i128::from(n_to);
    let den = i128::from(n_to) * i128::from(n_from);
    Some(num as f64 / den as f64 / human_sd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(xs: &[i64]) -> Moments {
        Moments {
            n: xs.len() as i64,
            sum: xs.iter().sum(),
            sumsq: xs.iter().map(|x| x * x).sum(),
        }
    }

    #[test]
    fn known_values() {
        assert_eq!(
            sd_z(m(&[2, 4, 4, 4, 5, 5, 7, 9]), 1.0).unwrap(),
            (32.0f64 / 7.0).sqrt()
        );
        assert_eq!(sd_z(m(&[1]), 1.0), None);
        assert_eq!(sd_z(m(&[70, 70, 70]), 3.3), Some(0.0));
        assert_eq!(sd_z(m(&[1, 3]), 2.0), Some(2f64.sqrt() / 2.0));
        assert_eq!(mean_z(2, 10, 4.0, 0.5), Some(2.0));
        assert_eq!(
            ratio(m(&[1, 2]), m(&[5, 5])),
            Some((Some(f64::INFINITY), RatioRule::SamplingZero))
        );
        assert_eq!(
            ratio(m(&[5, 5]), m(&[5, 5])),
            Some((None, RatioRule::BothZero))
        );
        assert_eq!(
            ratio(m(&[0, 2]), m(&[0, 4])),
            Some((Some(0.5), RatioRule::Quotient))
        );
        assert_eq!(shift_z(2, 10, 1, 5, 1.0), Some(0.0));
        assert_eq!(shift_z(2, 10, 1, 4, 2.0), Some(0.5));
    }

    /// The example: variance 100 over ten setups and over three samples is a tie.
    #[test]
    fn equal_variances_do_not_exceed() {
        let p = m(&[35, 65, 35, 65, 50, 50, 50, 50, 50, 50]);
        let s = m(&[40, 50, 60]);
        assert_eq!(p.variance(), Some(100.0));
        assert_eq!(s.variance(), Some(100.0));
        assert_eq!(variance_gt(p, s), Some(false));
        assert_eq!(variance_gt(s, p), Some(false));
        assert_eq!(ratio(p, s), Some((Some(1.0), RatioRule::Quotient)));
        let wider = m(&[35, 65, 35, 65, 50, 50, 50, 50, 50, 51]);
        assert_eq!(variance_gt(wider, s), Some(true));
        assert_eq!(variance_gt(p, m(&[40])), None);
    }

    proptest! {
        #[test]
        fn sd_is_shift_invariant(xs in prop::collection::vec(0i64..90, 2..12), c in 0i64..10) {
            let shifted: Vec<i64> = xs.iter().map(|x| x + c).collect();
            prop_assert_eq!(sd_z(m(&xs), 7.0), sd_z(m(&shifted), 7.0));
        }
    }
}
