//! The Benjamini-Hochberg step-up procedure on exact p-values.

use crate::frac::Fraction;

/// The false discovery rate the study's tables control: q = 1/20 (0.05), as a fraction.
pub const BH_Q: Fraction = Fraction { num: 1, den: 20 };

/// The result of [`benjamini_hochberg`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BhResult {
    /// Per input p-value, in input order: whether its hypothesis is rejected.
    pub rejected: Vec<bool>,
    /// How many are rejected (k below).
    pub count: usize,
    /// The largest rejected p-value, p_(k); `None` when nothing is rejected. A p-value is
    /// rejected exactly when it is at most this one.
    pub cutoff: Option<Fraction>,
}

/// Benjamini-Hochberg at level `q` over the m p-values `p` (each an exact fraction): order them
/// ascending, p_(1) <= ... <= p_(m); let k be the largest i with p_(i) <= i q / m (compared as
/// exact fractions: `p_num * q_den * m <= i * q_num * p_den`); reject the k hypotheses with the
/// smallest p-values, i.e. every p-value <= p_(k). None when no such i exists (and for m = 0).
/// Ties cannot split: if p_(k+1) = p_(k) then p_(k+1) <= k q/m < (k+1) q/m, so k is never
/// inside a run of equal p-values, and the result does not depend on how ties are ordered.
pub fn benjamini_hochberg(p: &[Fraction], q: Fraction) -> BhResult {
    let m = p.len() as u128;
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[a].cmp(&p[b]).then(a.cmp(&b)));
    let mut k = 0;
    for (i, &j) in order.iter().enumerate() {
        let rank = (i + 1) as u128;
        let x = p[j];
        // x <= rank * q / m, in integers (each factor below 2^64, each product below 2^128
        // for m below 2^64 only through the 128-bit widening of two factors at a time).
        let lhs = u128::from(x.num) * u128::from(q.den);
        let rhs = rank * u128::from(q.num);
        if crate::frac::ge(rhs, m, lhs, u128::from(x.den)) {
            k = i + 1;
        }
    }
    let cutoff = (k > 0).then(|| p[order[k - 1]]);
    let rejected = p.iter().map(|x| cutoff.is_some_and(|c| *x <= c)).collect();
    BhResult {
        rejected,
        count: k,
        cutoff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(num: u64, den: u64) -> Fraction {
        Fraction::new(num, den)
    }

    /// Benjamini and Hochberg's (1995) example: 15 p-values, q = 0.05: the four smallest are
    /// rejected (p_(4) = 0.0095 <= 4 x 0.05 / 15 = 0.0133; p_(5) = 0.0201 > 0.0167 and no later
    /// one qualifies).
    #[test]
    fn the_papers_example() {
        let p: Vec<Fraction> = [
            1u64, 4, 19, 95, 201, 278, 298, 344, 459, 3240, 4262, 5719, 6528, 7590, 10000,
        ]
        .iter()
        .map(|&x| f(x, 10000))
        .collect();
        let r = benjamini_hochberg(&p, BH_Q);
        assert_eq!(r.count, 4);
        assert_eq!(r.cutoff, Some(f(95, 10000)));
        assert_eq!(r.rejected.iter().filter(|&&x| x).count(), 4);
        assert!(r.rejected[..4].iter().all(|&x| x));
    }

    #[test]
    fn step_up_and_ties() {
        // m = 4, thresholds 1/80, 2/80, 3/80, 4/80: p_(3) = 3/80 qualifies though p_(2) does not.
        let p = [f(3, 80), f(1, 100), f(5, 80), f(3, 80)];
        let r = benjamini_hochberg(&p, BH_Q);
        // Ranks: 1/100, 3/80, 3/80, 5/80; 3/80 <= 3/80 (rank 3): k = 3, both 3/80 rejected.
        assert_eq!(r.rejected, [true, true, false, true]);
        assert_eq!(r.count, 3);
        // Exactly at the threshold counts; nothing rejected gives no cutoff.
        assert_eq!(benjamini_hochberg(&[f(1, 20)], BH_Q).count, 1);
        let none = benjamini_hochberg(&[f(2, 20), f(3, 20)], BH_Q);
        assert_eq!((none.count, none.cutoff), (0, None));
        assert_eq!(benjamini_hochberg(&[], BH_Q).count, 0);
    }
}
