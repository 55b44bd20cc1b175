//! The exact permutation test of one cell: are the protocol scores more spread out than the
//! sampling scores by more than a random split of the same scores would be?

use crate::frac::{ge, gt};
use crate::InferenceError;

/// Largest number of splits [`permutation_test`] enumerates (C(13, 3) = 286 in the study).
pub const MAX_SPLITS: u64 = 1_000_000;

/// The result of [`permutation_test`]: exact counts over every split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermutationTest {
    /// Number of splits enumerated: C(n_p + n_s, n_s).
    pub splits: u64,
    /// Splits whose statistic is at least the observed one (the observed split included).
    pub at_least: u64,
    /// Splits in which the protocol variance exceeds the sampling variance (exactly).
    pub protocol_gt: u64,
}

impl PermutationTest {
    /// `at_least / splits`.
    pub fn p_value(&self) -> f64 {
        self.at_least as f64 / self.splits as f64
    }

    /// `protocol_gt / splits`: the probability, under the permutation null, that the protocol
    /// SD exceeds the sampling SD.
    pub fn null_share_gt(&self) -> f64 {
        self.protocol_gt as f64 / self.splits as f64
    }
}

/// C(n, k), or `None` past `u64`.
fn choose(n: u64, k: u64) -> Option<u64> {
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * u128::from(n - i) / u128::from(i + 1);
        if c > u128::from(u64::MAX) {
            return None;
        }
    }
    u64::try_from(c).ok()
}

/// The statistic of one split, ordered: 0/0 (both variances 0) below every value, then the
/// finite ratios `dev_p / dev_s` by exact value, then +infinity (sampling variance 0).
/// Within one cell `n_p` and `n_s` are fixed, so the ratio of sample variances is this ratio
/// times the constant `n_s (n_s - 1) / (n_p (n_p - 1))` and orders the same.
#[derive(Debug, Clone, Copy)]
enum Stat {
    Undefined,
    Finite { dev_p: u128, dev_s: u128 },
    Infinite,
}

impl Stat {
    fn of(dev_p: u128, dev_s: u128) -> Stat {
        match (dev_p, dev_s) {
            (0, 0) => Stat::Undefined,
            (_, 0) => Stat::Infinite,
            _ => Stat::Finite { dev_p, dev_s },
        }
    }

    /// `self >= other` in the order above (a tie counts).
    fn at_least(self, other: Stat) -> bool {
        match (self, other) {
            (_, Stat::Undefined) => true,
            (Stat::Undefined, _) => false,
            (Stat::Infinite, _) => true,
            (Stat::Finite { .. }, Stat::Infinite) => false,
            (Stat::Finite { dev_p: a, dev_s: b }, Stat::Finite { dev_p: c, dev_s: d }) => {
                ge(a, b, c, d)
            }
        }
    }
}

/// `n q - s^2` for `n` values of sum `s` and sum of squares `q`: `n^2` times the population
/// variance, exactly 0 when the values are equal.
fn dev(n: i128, s: i128, q: i128) -> u128 {
    u128::try_from(n * q - s * s).unwrap_or(0)
}

/// The exact permutation test of a cell with `protocol` scores (one per setup) and `sampling`
/// scores (one per sample).
///
/// Null hypothesis: setups and samples are exchangeable, so each of the C(n_p + n_s, n_s) ways
/// of choosing which n_s of the pooled scores are the sampling scores is equally likely. Every
/// split is enumerated (no random numbers). Statistic: protocol sample variance / sampling
/// sample variance (divisor n - 1 each), compared as exact fractions; a zero sampling variance
/// with a positive protocol variance is +infinity, and 0/0 (both zero) ranks below every value,
/// so it never counts as exceeding a defined observed statistic (a cell whose scores are all
/// equal has every split 0/0 and p = 1). `at_least` counts the splits whose statistic is at
/// least the observed one, the observed split included, so p = at_least / splits >= 1 / splits.
///
/// Errors: fewer than two scores on either side (no sample variance), or more than
/// [`MAX_SPLITS`] splits.
pub fn permutation_test(
    protocol: &[i64],
    sampling: &[i64],
) -> Result<PermutationTest, InferenceError> {
    let (np, ns) = (protocol.len(), sampling.len());
    if np < 2 {
        return Err(InferenceError::TooFew {
            what: "protocol scores",
            got: np,
            need: 2,
        });
    }
    if ns < 2 {
        return Err(InferenceError::TooFew {
            what: "sampling scores",
            got: ns,
            need: 2,
        });
    }
    let n = np + ns;
    let splits = choose(n as u64, ns as u64).unwrap_or(u64::MAX);
    if splits > MAX_SPLITS {
        return Err(InferenceError::TooManySplits { splits });
    }
    let small = n <= 64
        && protocol
            .iter()
            .chain(sampling)
            .all(|x| x.unsigned_abs() <= 1 << 20);
    let (count, at_least, protocol_gt) = if small {
        enumerate_small(protocol, sampling)
    } else {
        enumerate_wide(protocol, sampling)
    };
    debug_assert_eq!(count, splits);
    Ok(PermutationTest {
        splits: count,
        at_least,
        protocol_gt,
    })
}

/// Counts (splits, at least the observed, protocol variance > sampling variance) for scores
/// of magnitude at most 2^20 and at most 64 of them: every sum fits an `i64` (|sum x| <= 2^26,
/// sum x^2 <= 2^46, dev <= 2^53) and every product of two devs a `u128`, so the comparisons are
/// exact with one widening multiplication each. Subsets are visited depth first with running
/// sums (the study's 286 splits per cell, at 10^5 cells, are the stage's largest loop).
fn enumerate_small(protocol: &[i64], sampling: &[i64]) -> (u64, u64, u64) {
    let all: Vec<i64> = protocol.iter().chain(sampling).copied().collect();
    let (np, ns) = (protocol.len() as i64, sampling.len() as i64);
    let total_s: i64 = all.iter().sum();
    let total_q: i64 = all.iter().map(|x| x * x).sum();
    let dev = |n: i64, s: i64, q: i64| u64::try_from(n * q - s * s).unwrap_or(0);
    let devs = |s_s: i64, q_s: i64| (dev(np, total_s - s_s, total_q - q_s), dev(ns, s_s, q_s));
    let obs_s: i64 = sampling.iter().sum();
    let obs_q: i64 = sampling.iter().map(|x| x * x).sum();
    let (op, os) = devs(obs_s, obs_q);
    let wide = |a: u64, b: u64| u128::from(a) * u128::from(b);
    let (den_p, den_s) = ((np * (np - 1)) as u64, (ns * (ns - 1)) as u64);
    let mut counts = (0u64, 0u64, 0u64);
    let mut visit = |s_s: i64, q_s: i64| {
        let (dp, ds) = devs(s_s, q_s);
        // The order of `Stat`: 0/0 below every value, +inf above.
        let reaches = if op == 0 && os == 0 {
            true
        } else if ds == 0 {
            dp > 0
        } else if os == 0 {
            false
        } else {
            wide(dp, os) >= wide(op, ds)
        };
        counts.0 += 1;
        counts.1 += u64::from(reaches);
        counts.2 += u64::from(wide(dp, den_s) > wide(ds, den_p));
    };
    fn walk(all: &[i64], from: usize, left: usize, s: i64, q: i64, f: &mut impl FnMut(i64, i64)) {
        if left == 0 {
            f(s, q);
            return;
        }
        for i in from..=all.len() - left {
            let x = all[i];
            walk(all, i + 1, left - 1, s + x, q + x * x, f);
        }
    }
    if sampling.len() == 3 {
        // The study's case, unrolled (the recursion costs as much as the statistic).
        let n = all.len();
        for i in 0..n {
            let (si, qi) = (all[i], all[i] * all[i]);
            for j in i + 1..n {
                let (sj, qj) = (si + all[j], qi + all[j] * all[j]);
                for &x in &all[j + 1..] {
                    visit(sj + x, qj + x * x);
                }
            }
        }
    } else {
        walk(&all, 0, sampling.len(), 0, 0, &mut visit);
    }
    counts
}

/// [`enumerate_small`] for any `i64` scores: 128-bit sums and exact fraction comparisons.
fn enumerate_wide(protocol: &[i64], sampling: &[i64]) -> (u64, u64, u64) {
    let (np, ns) = (protocol.len(), sampling.len());
    let n = np + ns;
    let all: Vec<i128> = protocol
        .iter()
        .chain(sampling)
        .map(|&x| i128::from(x))
        .collect();
    let (total_s, total_q) = all
        .iter()
        .fold((0i128, 0i128), |(s, q), &x| (s + x, q + x * x));
    let (np_i, ns_i) = (np as i128, ns as i128);
    // protocol variance > sampling variance  <=>  dev_p / (n_p (n_p - 1)) > dev_s / (n_s (n_s - 1))
    let (den_p, den_s) = ((np_i * (np_i - 1)) as u128, (ns_i * (ns_i - 1)) as u128);
    let stat_of = |s_s: i128, q_s: i128| {
        let dev_s = dev(ns_i, s_s, q_s);
        let dev_p = dev(np_i, total_s - s_s, total_q - q_s);
        (dev_p, dev_s)
    };
    let (obs_s, obs_q) = sampling.iter().fold((0i128, 0i128), |(s, q), &x| {
        (s + i128::from(x), q + i128::from(x) * i128::from(x))
    });
    let (op, os) = stat_of(obs_s, obs_q);
    let observed = Stat::of(op, os);
    // Every ns-subset of the n pooled positions, in lexicographic order of positions.
    let mut idx: Vec<usize> = (0..ns).collect();
    let (mut count, mut at_least, mut protocol_gt) = (0u64, 0u64, 0u64);
    loop {
        let (mut s, mut q) = (0i128, 0i128);
        for &i in &idx {
            s += all[i];
            q += all[i] * all[i];
        }
        let (dp, ds) = stat_of(s, q);
        count += 1;
        if Stat::of(dp, ds).at_least(observed) {
            at_least += 1;
        }
        if gt(dp, den_p, ds, den_s) {
            protocol_gt += 1;
        }
        // Next subset: the rightmost position that can move right, then the rest after it.
        let Some(j) = (0..ns).rev().find(|&j| idx[j] < n - ns + j) else {
            break;
        };
        idx[j] += 1;
        for t in j + 1..ns {
            idx[t] = idx[t - 1] + 1;
        }
    }
    (count, at_least, protocol_gt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_coefficients() {
        assert_eq!(choose(13, 3), Some(286));
        assert_eq!(choose(20, 10), Some(184_756));
        assert_eq!(choose(200, 100), None);
    }

    #[test]
    fn too_few_or_too_many() {
        assert!(matches!(
            permutation_test(&[1], &[1, 2]),
            Err(InferenceError::TooFew { need: 2, .. })
        ));
        assert!(matches!(
            permutation_test(&[1, 2], &[3]),
            Err(InferenceError::TooFew { .. })
        ));
        let big = vec![1i64; 20];
        assert_eq!(
            permutation_test(&big, &big),
            Err(InferenceError::TooManySplits {
                splits: 137_846_528_820
            })
        );
    }

    #[test]
    fn both_enumerations_agree() {
        let mut x: u64 = 7;
        for _ in 0..300 {
            let mut next = || {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                ((x >> 33) % 12) as i64 + 40
            };
            let p: Vec<i64> = (0..7).map(|_| next()).collect();
            let s: Vec<i64> = (0..3).map(|_| next()).collect();
            assert_eq!(
                enumerate_small(&p, &s),
                enumerate_wide(&p, &s),
                "{p:?} {s:?}"
            );
        }
        // Scores past the fast path's bound take the wide one.
        let t = permutation_test(&[0, 1 << 40, 5], &[1, 2]).unwrap();
        assert_eq!(t.splits, 10);
    }

    #[test]
    fn all_equal_scores_give_p_one() {
        let t = permutation_test(&[5; 10], &[5; 3]).unwrap();
        assert_eq!((t.splits, t.at_least, t.protocol_gt), (286, 286, 0));
    }

    #[test]
    fn order_of_stats() {
        let fin = Stat::of(4, 2);
        assert!(Stat::Infinite.at_least(Stat::Infinite));
        assert!(Stat::Infinite.at_least(fin));
        assert!(!fin.at_least(Stat::Infinite));
        assert!(!Stat::Undefined.at_least(fin));
        assert!(Stat::Undefined.at_least(Stat::Undefined));
        assert!(fin.at_least(Stat::of(2, 1)) && fin.at_least(Stat::Undefined));
        assert!(!Stat::of(0, 3).at_least(fin) && Stat::of(0, 3).at_least(Stat::Undefined));
    }
}
