//! Exact (Clopper-Pearson) binomial intervals.
//!
//! For `k` successes in `n` trials and level `1 - alpha` the interval is
//! `[B(alpha/2; k, n-k+1), B(1-alpha/2; k+1, n-k)]`, where `B(q; a, b)` is the `q` quantile
//! of the Beta(a, b) distribution; the lower bound is 0 when `k = 0` and the upper bound 1
//! when `k = n`. The Beta CDF (regularized incomplete beta function) is evaluated with its
//! continued fraction (modified Lentz), and the quantile is found by bisection on [0, 1]
//! (the CDF is monotone): 200 halvings, i.e. to the resolution of an f64. Every step is a
//! fixed sequence of f64 operations, so the result is the same on every run.

// Not `statrs`: these bounds are written to the sweep tables bit for bit, and statrs's log-gamma
// is another Lanczos approximation (g = 10.900511, 11 terms), whose last bits (so bytes) differ.
use protospread_inference::ln_gamma;

/// Smallest magnitude Lentz's `c` and `d` may take (a zero would divide by zero).
const TINY: f64 = 1e-300;

fn not_tiny(x: f64) -> f64 {
    if x.abs() < TINY {
        TINY
    } else {
        x
    }
}

/// One modified-Lentz update of `c` and `d` for the term `aa`; returns the factor `d * c`
/// by which the fraction's value changes.
fn lentz_step(aa: f64, c: &mut f64, d: &mut f64) -> f64 {
    *d = not_tiny(1.0 + aa * *d);
    *c = not_tiny(1.0 + aa / *c);
    *d = 1.0 / *d;
    *d * *c
}

/// Continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / not_tiny(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..=10_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        h *= lentz_step(m * (b - m) * x / ((qam + m2) * (a + m2)), &mut c, &mut d);
        let del = lentz_step(
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
            &mut c,
            &mut d,
        );
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

/// Regularized incomplete beta function I_x(a, b) = P(Beta(a, b) <= x), a, b > 0.
pub(crate) fn beta_cdf(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    // The continued fraction converges fast for x < (a+1)/(a+b+2); use the symmetry
    // I_x(a,b) = 1 - I_{1-x}(b,a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

/// The `q` quantile of Beta(a, b), by bisection.
pub(crate) fn beta_quantile(q: f64, a: f64, b: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if beta_cdf(mid, a, b) < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Clopper-Pearson interval for `k` of `n` at level `1 - alpha`. `n` must be positive.
pub(crate) fn clopper_pearson(k: u64, n: u64, alpha: f64) -> (f64, f64) {
    assert!(n > 0 && k <= n, "clopper_pearson({k}, {n})");
    let (kf, nf) = (k as f64, n as f64);
    let lo = if k == 0 {
        0.0
    } else {
        beta_quantile(alpha / 2.0, kf, nf - kf + 1.0)
    };
    let hi = if k == n {
        1.0
    } else {
        beta_quantile(1.0 - alpha / 2.0, kf + 1.0, nf - kf)
    };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// P(X >= k) for X ~ Binomial(n, p), by summing the probability mass directly: an
    /// independent route to the same quantity as the Beta CDF.
    fn binom_upper_tail(k: u64, n: u64, p: f64) -> f64 {
        let mut total = 0.0;
        for j in k..=n {
            let mut ln_c = 0.0;
            for i in 0..j {
                ln_c += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
            }
            total += (ln_c + j as f64 * p.ln() + (n - j) as f64 * (1.0 - p).ln()).exp();
        }
        total
    }

    #[test]
    fn closed_forms_at_the_edges() {
        // k = 0: upper = 1 - (alpha/2)^(1/n); k = n: lower = (alpha/2)^(1/n).
        for n in [1u64, 2, 10, 57, 1000] {
            let (lo, hi) = clopper_pearson(0, n, 0.05);
            assert_eq!(lo, 0.0);
            assert!(
                (hi - (1.0 - 0.025f64.powf(1.0 / n as f64))).abs() < 1e-12,
                "{n}"
            );
            let (lo, hi) = clopper_pearson(n, n, 0.05);
            assert_eq!(hi, 1.0);
            assert!((lo - 0.025f64.powf(1.0 / n as f64)).abs() < 1e-12, "{n}");
            // k = 1: lower = 1 - (1 - alpha/2)^(1/n).
            let (lo, _) = clopper_pearson(1, n, 0.05);
            assert!(
                (lo - (1.0 - 0.975f64.powf(1.0 / n as f64))).abs() < 1e-12,
                "{n}"
            );
        }
    }

    #[test]
    fn published_values() {
        // R: binom.test(5, 10)$conf.int = 0.1870860 0.8129140
        let (lo, hi) = clopper_pearson(5, 10, 0.05);
        assert!((lo - 0.187_086_0).abs() < 5e-8, "{lo}");
        assert!((hi - 0.812_914_0).abs() < 5e-8, "{hi}");
        // scipy 1.17.1: beta.ppf(0.025, k, n-k+1), beta.ppf(0.975, k+1, n-k).
        for (k, n, want_lo, want_hi) in [
            (6, 8, 0.349_144_205_587_175_8, 0.968_145_973_750_055_8),
            (30, 40, 0.588_038_019_848_570_2, 0.873_085_201_067_155),
            (20, 40, 0.338_017_813_737_234_6, 0.661_982_186_262_765_6),
        ] {
            let (lo, hi) = clopper_pearson(k, n, 0.05);
            assert!((lo - want_lo).abs() < 1e-12, "{k}/{n}: {lo}");
            assert!((hi - want_hi).abs() < 1e-12, "{k}/{n}: {hi}");
        }
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut f = 1.0f64;
        for n in 1..30u32 {
            f *= n as f64;
            assert!((ln_gamma(n as f64 + 1.0) - f.ln()).abs() < 1e-10, "{n}");
        }
    }

    proptest! {
        /// The defining property: at the lower bound, P(X >= k) = alpha/2; at the upper
        /// bound, P(X <= k) = alpha/2.
        #[test]
        fn bounds_solve_the_tail_equations(n in 1u64..150, frac in 0.0f64..=1.0) {
            let k = ((n as f64) * frac).round() as u64;
            let (lo, hi) = clopper_pearson(k, n, 0.05);
            prop_assert!(lo <= k as f64 / n as f64 && k as f64 / n as f64 <= hi);
            if k > 0 {
                prop_assert!((binom_upper_tail(k, n, lo) - 0.025).abs() < 1e-9);
            }
            if k < n {
                let le_k = 1.0 - binom_upper_tail(k + 1, n, hi);
                prop_assert!((le_k - 0.025).abs() < 1e-9);
            }
        }
    }
}
