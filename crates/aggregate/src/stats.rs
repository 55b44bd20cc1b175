//! The few statistics of the study, each computed in one fixed order.
//!
//! Inputs are slices whose order the caller fixes (rows sorted by key), so every float sum is
//! taken in the same order on every run, whatever the thread count. The conventions are stated
//! in docs/statistics.md and must stay in sync with it.

/// Arithmetic mean, summed left to right. `None` for an empty slice.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut s = 0.0;
    for x in xs {
        s += x;
    }
    Some(s / xs.len() as f64)
}

/// Sample standard deviation (divisor n - 1), two-pass: mean first, then the sum of squared
/// deviations, both left to right. `None` for fewer than two values. Identical values give
/// exactly 0: the rounded mean of n equal doubles can differ from them by an ulp, and a
/// spurious 1e-16 would turn "no spread" into "protocol SD > sampling SD" with an infinite ratio.
pub fn sample_sd(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    if xs.iter().all(|x| *x == xs[0]) {
        return Some(0.0);
    }
    let m = mean(xs)?;
    let mut ss = 0.0;
    for x in xs {
        let d = x - m;
        ss += d * d;
    }
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// Median: the middle value of the sorted values for odd n, the mean of the two middle values
/// for even n. Sorting uses IEEE total order, so `+inf` ranks above every finite value.
/// `None` for an empty slice.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        Some(v[n / 2])
    } else {
        Some((v[n / 2 - 1] + v[n / 2]) / 2.0)
    }
}

/// Smallest value (IEEE total order). `None` for an empty slice.
pub fn min(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().min_by(|a, b| a.total_cmp(b))
}

/// Largest value (IEEE total order). `None` for an empty slice.
pub fn max(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().max_by(|a, b| a.total_cmp(b))
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

/// Ratio protocol SD / sampling SD with the explicit rule for a zero sampling SD.
pub fn ratio(protocol_sd: f64, sampling_sd: f64) -> (Option<f64>, RatioRule) {
    if sampling_sd > 0.0 {
        (Some(protocol_sd / sampling_sd), RatioRule::Quotient)
    } else if protocol_sd > 0.0 {
        (Some(f64::INFINITY), RatioRule::SamplingZero)
    } else {
        (None, RatioRule::BothZero)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(
            sample_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap(),
            (32.0f64 / 7.0).sqrt()
        );
        assert_eq!(sample_sd(&[1.0]), None);
        // 0.1 ten times: the rounded mean is not 0.1, the SD must still be exactly 0.
        assert_eq!(sample_sd(&[0.1; 10]), Some(0.0));
        assert_eq!(sample_sd(&[0.7, 0.7, 0.7]), Some(0.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(
            median(&[1.0, f64::INFINITY, f64::INFINITY]),
            Some(f64::INFINITY)
        );
        assert_eq!(median(&[]), None);
        assert_eq!(
            ratio(1.0, 0.0),
            (Some(f64::INFINITY), RatioRule::SamplingZero)
        );
        assert_eq!(ratio(0.0, 0.0), (None, RatioRule::BothZero));
        assert_eq!(ratio(1.0, 2.0), (Some(0.5), RatioRule::Quotient));
    }

    proptest! {
        #[test]
        fn sd_is_shift_invariant_and_nonnegative(xs in prop::collection::vec(-10.0f64..10.0, 2..12), c in -5.0f64..5.0) {
            let sd = sample_sd(&xs).unwrap();
            prop_assert!(sd >= 0.0);
            let shifted: Vec<f64> = xs.iter().map(|x| x + c).collect();
            prop_assert!((sample_sd(&shifted).unwrap() - sd).abs() < 1e-9);
        }

        #[test]
        fn median_between_min_and_max(xs in prop::collection::vec(-10.0f64..10.0, 1..12)) {
            let m = median(&xs).unwrap();
            prop_assert!(m >= min(&xs).unwrap() && m <= max(&xs).unwrap());
        }
    }
}
