//! A non-negative fraction compared exactly.

use std::cmp::Ordering;

/// `num / den` with `den > 0`, ordered by its exact value (`a/b` vs `c/d` as `a d` vs `c b` in
/// 128 bits, which cannot overflow for 64-bit parts): a score (`sum / count`) or an accuracy
/// (`correct / n`) whose order must not depend on float rounding.
#[derive(Debug, Clone, Copy)]
pub struct Fraction {
    /// Numerator.
    pub num: u64,
    /// Denominator, positive.
    pub den: u64,
}

impl Fraction {
    /// `num / den`. Panics when `den` is 0 (a caller's bug: every count here is positive).
    pub fn new(num: u64, den: u64) -> Fraction {
        assert!(den > 0, "Fraction with denominator 0");
        Fraction { num, den }
    }

    /// The value as the nearest double (one division).
    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

impl PartialEq for Fraction {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Fraction {}

impl PartialOrd for Fraction {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Fraction {
    fn cmp(&self, other: &Self) -> Ordering {
        (u128::from(self.num) * u128::from(other.den))
            .cmp(&(u128::from(other.num) * u128::from(self.den)))
    }
}

/// `a / b >= c / d` for non-negative `a, c` and positive `b, d`, exactly for any 128-bit
/// values: cross-multiplication when the products fit, else a continued-fraction comparison.
pub(crate) fn ge(a: u128, b: u128, c: u128, d: u128) -> bool {
    match (a.checked_mul(d), c.checked_mul(b)) {
        (Some(x), Some(y)) => x >= y,
        _ => !gt(c, d, a, b),
    }
}

/// `a / b > c / d` for non-negative `a, c` and positive `b, d`, exactly for any 128-bit
/// values (see [`ge`]); also the aggregate stage's "protocol SD > sampling SD".
pub fn gt(mut a: u128, mut b: u128, mut c: u128, mut d: u128) -> bool {
    if let (Some(x), Some(y)) = (a.checked_mul(d), c.checked_mul(b)) {
        return x > y;
    }
    loop {
        let (qa, ra, qc, rc) = (a / b, a % b, c / d, c % d);
        if qa != qc {
            return qa > qc;
        }
        if ra == 0 {
            return false;
        }
        if rc == 0 {
            return true;
        }
        // ra/b > rc/d  <=>  d/rc > b/ra
        (a, b, c, d) = (d, rc, b, ra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn order_is_exact() {
        assert_eq!(Fraction::new(1, 3), Fraction::new(2, 6));
        assert!(Fraction::new(31, 50) > Fraction::new(60, 100));
        assert!(Fraction::new(u64::MAX - 1, u64::MAX) < Fraction::new(u64::MAX, u64::MAX));
        assert!(gt(u128::MAX - 1, u128::MAX, u128::MAX - 2, u128::MAX));
        assert!(!gt(u128::MAX - 1, u128::MAX, u128::MAX - 1, u128::MAX));
        assert!(ge(u128::MAX - 1, u128::MAX, u128::MAX - 1, u128::MAX));
        // Zero numerators: 0/7 = 0/3, and any positive value exceeds them.
        assert!(!gt(0, 7, 0, 3) && ge(0, 7, 0, 3));
        assert!(gt(1, 7, 0, 3));
    }

    proptest! {
        #[test]
        fn comparisons_match_cross_multiplication(a in 0u64..1000, b in 1u64..1000, c in 0u64..1000, d in 1u64..1000) {
            let (a, b, c, d) = (a as u128, b as u128, c as u128, d as u128);
            prop_assert_eq!(gt(a, b, c, d), a * d > c * b);
            prop_assert_eq!(ge(a, b, c, d), a * d >= c * b);
            // The continued fraction agrees when scaled past the fast path.
            let s = u128::MAX / 2000;
            prop_assert_eq!(gt(a * s, b * s, c, d), a * d > c * b);
        }
    }
}
