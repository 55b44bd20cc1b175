//! Agreement of model orders across setups: Kendall's tau-b, order flips, possible leaders.

use crate::frac::Fraction;
use crate::InferenceError;

/// Pairs among `t` tied items.
fn tied_pairs(t: u64) -> u64 {
    t * t.saturating_sub(1) / 2
}

/// Pairs among the runs of equal values of `v` (sorted by `same`).
fn ties_in<T>(v: &[T], same: impl Fn(&T, &T) -> bool) -> u64 {
    let (mut total, mut run) = (0, 1u64);
    for i in 1..v.len() {
        if same(&v[i - 1], &v[i]) {
            run += 1;
        } else {
            total += tied_pairs(run);
            run = 1;
        }
    }
    total + tied_pairs(run)
}

/// Inversions of `v` (pairs i < j with v[i] > v[j]), sorting it (merge sort).
fn inversions(v: &mut [u32], buf: &mut Vec<u32>) -> u64 {
    let n = v.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let mut count = inversions(&mut v[..mid], buf) + inversions(&mut v[mid..], buf);
    buf.clear();
    let (mut i, mut j) = (0, mid);
    while i < mid && j < n {
        if v[j] < v[i] {
            count += (mid - i) as u64;
            buf.push(v[j]);
            j += 1;
        } else {
            buf.push(v[i]);
            i += 1;
        }
    }
    buf.extend_from_slice(&v[i..mid]);
    buf.extend_from_slice(&v[j..n]);
    v.copy_from_slice(buf);
    count
}

/// Dense ranks of `x` (0 for the lowest value, equal values one rank): Kendall's tau-b
/// depends only on the order, so it is computed on these (exact: the values are compared as
/// fractions once, here).
fn dense_ranks(x: &[Fraction]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].cmp(&x[b]));
    let mut ranks = vec![0u32; x.len()];
    let mut r = 0;
    for (i, &m) in order.iter().enumerate() {
        if i > 0 && x[order[i - 1]] != x[m] {
            r += 1;
        }
        ranks[m] = r;
    }
    ranks
}

/// Kendall's tau-b of two paired samples (values compared exactly):
/// `(C - D) / sqrt((n0 - n1) (n0 - n2))` with C concordant and D discordant pairs, n0 =
/// n (n - 1) / 2, n1 and n2 the pairs tied in `x` and in `y`. A pair tied in either is neither
/// concordant nor discordant. `None` when `x` or `y` is constant (or n < 2): the denominator
/// is 0. Knight's O(n log n) algorithm: sort by (x, y); then C - D = n0 - n1 - n2 + n3 - 2 S,
/// with n3 the pairs tied in both and S the inversions of y in that order.
pub fn kendall_tau_b(x: &[Fraction], y: &[Fraction]) -> Option<f64> {
    assert_eq!(x.len(), y.len(), "kendall_tau_b of unequal lengths");
    tau_b_of_ranks(&dense_ranks(x), &dense_ranks(y))
}

/// [`kendall_tau_b`] of two rank vectors.
fn tau_b_of_ranks(x: &[u32], y: &[u32]) -> Option<f64> {
    let n = x.len() as u64;
    let n0 = tied_pairs(n);
    let mut pairs: Vec<u64> = x
        .iter()
        .zip(y)
        .map(|(&a, &b)| (u64::from(a) << 32) | u64::from(b))
        .collect();
    pairs.sort_unstable();
    let n1 = ties_in(&pairs, |a, b| a >> 32 == b >> 32);
    let n3 = ties_in(&pairs, |a, b| a == b);
    let mut ys: Vec<u32> = pairs.iter().map(|p| *p as u32).collect();
    let mut buf = Vec::with_capacity(ys.len());
    let s = inversions(&mut ys, &mut buf);
    let n2 = ties_in(&ys, |a, b| a == b);
    let (a, b) = (n0 - n1, n0 - n2);
    if a == 0 || b == 0 {
        return None;
    }
    let num = i128::from(n0) - i128::from(n1) - i128::from(n2) + i128::from(n3) - 2 * i128::from(s);
    Some(num as f64 / ((u128::from(a) * u128::from(b)) as f64).sqrt())
}

/// The median of `v` (total order, +inf above every number; even count: the mean of the two
/// middle values); `None` when empty. Sorts `v`.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // Equal middle values are that value (also +inf, where the mean would be +inf anyway).
    Some(if n % 2 == 1 || v[n / 2 - 1] == v[n / 2] {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// How much the order of models depends on the setup ([`ranking`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    /// Setups compared.
    pub setups: usize,
    /// Models ranked.
    pub models: usize,
    /// Pairs of setups with a defined tau-b (neither setup gives every model the same score).
    pub setup_pairs: usize,
    /// Median tau-b over those pairs.
    pub tau_median: Option<f64>,
    /// Lowest tau-b over those pairs.
    pub tau_min: Option<f64>,
    /// Pairs of models: models (models - 1) / 2.
    pub model_pairs: u64,
    /// Pairs of models whose order flips: one setup puts the first strictly above the
    /// second, another strictly below (a tie is not an order).
    pub flipped_pairs: u64,
    /// Per model: whether some setup ranks it first (its score is the highest there; ties
    /// included).
    pub can_lead: Vec<bool>,
}

/// Ranking robustness of `scores[setup][model]` (every setup scores every model): Kendall's
/// tau-b ([`kendall_tau_b`]) between every pair of setups (median and minimum), the pairs of
/// models whose order flips between some two setups, and which models some setup puts first.
/// Flips are counted with bitsets: for each model, the models strictly above it in some setup
/// and those strictly below it in some setup; a pair flips when each is in the other's
/// "above" set somewhere, i.e. the partner is in both sets.
pub fn ranking(scores: &[Vec<Fraction>]) -> Result<Ranking, InferenceError> {
    let setups = scores.len();
    let models = scores.first().map_or(0, Vec::len);
    if let Some(s) = scores.iter().find(|s| s.len() != models) {
        return Err(InferenceError::Shape(format!(
            "a setup scores {} models, another {models}",
            s.len()
        )));
    }
    let ranks: Vec<Vec<u32>> = scores.iter().map(|s| dense_ranks(s)).collect();
    let mut taus = Vec::new();
    for a in 0..setups {
        for b in a + 1..setups {
            taus.extend(tau_b_of_ranks(&ranks[a], &ranks[b]));
        }
    }
    let setup_pairs = taus.len();
    let tau_min = taus.iter().copied().min_by(f64::total_cmp);
    let tau_median = median(&mut taus);
    let words = models.div_ceil(64);
    let (mut above, mut below) = (vec![0u64; models * words], vec![0u64; models * words]);
    let mut can_lead = vec![false; models];
    let mut order: Vec<usize> = (0..models).collect();
    for s in scores {
        order.sort_by(|&a, &b| s[a].cmp(&s[b]));
        // Ascending: every model of a lower value is below each model of a higher one.
        let mut seen = vec![0u64; words];
        let mut i = 0;
        while i < models {
            let mut j = i;
            while j < models && s[order[j]] == s[order[i]] {
                j += 1;
            }
            for &m in &order[i..j] {
                for (w, x) in below[m * words..(m + 1) * words].iter_mut().zip(&seen) {
                    *w |= x;
                }
            }
            for &m in &order[i..j] {
                seen[m / 64] |= 1 << (m % 64);
            }
            i = j;
        }
        let mut seen = vec![0u64; words];
        let mut i = models;
        while i > 0 {
            let mut j = i;
            while j > 0 && s[order[j - 1]] == s[order[i - 1]] {
                j -= 1;
            }
            for &m in &order[j..i] {
                for (w, x) in above[m * words..(m + 1) * words].iter_mut().zip(&seen) {
                    *w |= x;
                }
                if i == models {
                    can_lead[m] = true;
                }
            }
            for &m in &order[j..i] {
                seen[m / 64] |= 1 << (m % 64);
            }
            i = j;
        }
    }
    let flip_ends: u64 = (0..models)
        .map(|m| {
            let r = m * words..(m + 1) * words;
            above[r.clone()]
                .iter()
                .zip(&below[r])
                .map(|(a, b)| u64::from((a & b).count_ones()))
                .sum::<u64>()
        })
        .sum();
    Ok(Ranking {
        setups,
        models,
        setup_pairs,
        tau_median,
        tau_min,
        model_pairs: tied_pairs(models as u64),
        flipped_pairs: flip_ends / 2,
        can_lead,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fr(v: &[u64]) -> Vec<Fraction> {
        v.iter().map(|&x| Fraction::new(x, 1)).collect()
    }

    /// Every pair, counted directly.
    fn tau_b_brute(x: &[Fraction], y: &[Fraction]) -> Option<f64> {
        let n = x.len();
        let (mut c, mut d, mut tx, mut ty) = (0i64, 0i64, 0i64, 0i64);
        for i in 0..n {
            for j in i + 1..n {
                let (a, b) = (x[i].cmp(&x[j]), y[i].cmp(&y[j]));
                if a.is_eq() {
                    tx += 1;
                }
                if b.is_eq() {
                    ty += 1;
                }
                if !a.is_eq() && !b.is_eq() {
                    if a == b {
                        c += 1;
                    } else {
                        d += 1;
                    }
                }
            }
        }
        let n0 = (n * n.saturating_sub(1) / 2) as i64;
        let den = ((n0 - tx) as f64 * (n0 - ty) as f64).sqrt();
        (den > 0.0).then(|| (c - d) as f64 / den)
    }

    #[test]
    fn tau_b_by_hand() {
        // x = 1,2,3,4; y = 1,3,2,4: 5 concordant, 1 discordant, no ties: 4/6.
        assert_eq!(
            kendall_tau_b(&fr(&[1, 2, 3, 4]), &fr(&[1, 3, 2, 4])),
            Some(4.0 / 6.0)
        );
        // Reversed: -1. Constant: undefined.
        assert_eq!(kendall_tau_b(&fr(&[1, 2, 3]), &fr(&[3, 2, 1])), Some(-1.0));
        assert_eq!(kendall_tau_b(&fr(&[1, 2, 3]), &fr(&[5, 5, 5])), None);
        // Ties: x = 1,1,2; y = 1,2,3: n0 = 3, n1 = 1, n2 = 0, C = 2, D = 0: 2 / sqrt(2 x 3).
        assert_eq!(
            kendall_tau_b(&fr(&[1, 1, 2]), &fr(&[1, 2, 3])),
            Some(2.0 / 6f64.sqrt())
        );
    }

    #[test]
    fn flips_and_leaders_by_hand() {
        // Three models under three setups: A > B > C, B > A > C, A = C > B.
        let r = ranking(&[fr(&[3, 2, 1]), fr(&[2, 3, 1]), fr(&[2, 1, 2])]).unwrap();
        // A-B flips (setups 1, 2); B-C flips (setups 1, 3); A-C never (A >= C everywhere).
        assert_eq!((r.model_pairs, r.flipped_pairs), (3, 2));
        // A leads in 1 and (tied) 3, B in 2, C (tied) in 3.
        assert_eq!(r.can_lead, [true, true, true]);
        // taus: (1,2) 1/3, (1,3) 1/sqrt(2*3)... over three defined pairs.
        assert_eq!(r.setup_pairs, 3);
        assert_eq!(r.tau_min, kendall_tau_b(&fr(&[2, 3, 1]), &fr(&[2, 1, 2])));
        let one = ranking(&[fr(&[1, 2])]).unwrap();
        assert_eq!(
            (one.setup_pairs, one.tau_median, one.flipped_pairs),
            (0, None, 0)
        );
        assert!(ranking(&[fr(&[1, 2]), fr(&[1])]).is_err());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut [1.0, f64::INFINITY]), Some(f64::INFINITY));
        assert_eq!(median(&mut []), None);
    }

    proptest! {
        #[test]
        fn tau_b_matches_the_pair_count(v in prop::collection::vec((0u64..5, 0u64..5), 0..40)) {
            let (x, y): (Vec<u64>, Vec<u64>) = v.into_iter().unzip();
            let (x, y) = (fr(&x), fr(&y));
            match (kendall_tau_b(&x, &y), tau_b_brute(&x, &y)) {
                (Some(a), Some(b)) => prop_assert!((a - b).abs() < 1e-12, "{} vs {}", a, b),
                (a, b) => prop_assert_eq!(a, b),
            }
        }

        #[test]
        fn flips_match_the_pair_count(s in prop::collection::vec(prop::collection::vec(0u64..4, 70), 1..5)) {
            let scores: Vec<Vec<Fraction>> = s.iter().map(|v| fr(v)).collect();
            let r = ranking(&scores).unwrap();
            let mut flips = 0;
            for i in 0..70 {
                for j in i + 1..70 {
                    let up = s.iter().any(|v| v[i] > v[j]);
                    let down = s.iter().any(|v| v[i] < v[j]);
                    flips += u64::from(up && down);
                }
            }
            prop_assert_eq!(r.flipped_pairs, flips);
            for m in 0..70 {
                let leads = s.iter().any(|v| v.iter().all(|&o| o <= v[m]));
                prop_assert_eq!(r.can_lead[m], leads);
            }
        }
    }
}
