//! Tests of paired binary outcomes: the same documents answered under several setups.

use crate::gamma::chi_square_sf;
use crate::InferenceError;

/// Cochran's Q of k paired binary outcomes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CochranQ {
    /// The statistic (0 when every document has the same outcome under every setup).
    pub q: f64,
    /// Degrees of freedom, k - 1.
    pub df: u64,
    /// P(chi-square(k - 1) >= q): the asymptotic p-value.
    pub p_value: f64,
}

/// Cochran's Q over `k = column_totals.len()` setups and `row_totals.len()` documents:
/// `column_totals[j]` = documents right under setup j, `row_totals[i]` = setups under which
/// document i is right (0..=k), so both sum to the number of right answers N. With
/// `Q = (k - 1) (k sum_j C_j^2 - N^2) / (k N - sum_i R_i^2)`, computed in integers and divided
/// once; p from the chi-square distribution with k - 1 degrees of freedom
/// ([`chi_square_sf`]). When the denominator is 0 every document is right under all setups or
/// under none, the numerator is 0 too, and Q = 0, p = 1 (no discordant document).
pub fn cochran_q(column_totals: &[u64], row_totals: &[u64]) -> Result<CochranQ, InferenceError> {
    let k = column_totals.len() as u64;
    if k < 2 {
        return Err(InferenceError::TooFew {
            what: "setups of Cochran's Q",
            got: column_totals.len(),
            need: 2,
        });
    }
    if let Some(r) = row_totals.iter().find(|&&r| r > k) {
        return Err(InferenceError::Shape(format!(
            "a document right under {r} of {k} setups"
        )));
    }
    let n: u128 = column_totals.iter().map(|&c| u128::from(c)).sum();
    let n_rows: u128 = row_totals.iter().map(|&r| u128::from(r)).sum();
    if n != n_rows {
        return Err(InferenceError::Shape(format!(
            "column totals sum to {n}, row totals to {n_rows}"
        )));
    }
    let k128 = u128::from(k);
    let sum_c2: u128 = column_totals.iter().map(|&c| u128::from(c).pow(2)).sum();
    let sum_r2: u128 = row_totals.iter().map(|&r| u128::from(r).pow(2)).sum();
    let den = k128 * n - sum_r2;
    if den == 0 {
        return Ok(CochranQ {
            q: 0.0,
            df: k - 1,
            p_value: 1.0,
        });
    }
    let num = (k128 - 1) * (k128 * sum_c2 - n * n);
    let q = num as f64 / den as f64;
    Ok(CochranQ {
        q,
        df: k - 1,
        p_value: chi_square_sf(q, k - 1),
    })
}

/// McNemar's exact test of two paired binary outcomes: `b` documents right under the first
/// setup only, `c` under the second only. Under the null each discordant document is
/// equally likely either way, so min(b, c) is binomial(b + c, 1/2) in its lower tail:
/// p = min(1, 2 sum_{i=0}^{min(b,c)} C(b+c, i) / 2^(b+c)) (two-sided, doubled tail); 1 when
/// b + c = 0. For b + c <= 126 the sum is an exact integer and only the final division
/// rounds; beyond, the terms are summed in log space.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    let m = b.min(c);
    if n == 0 {
        return 1.0;
    }
    let tail = if n <= 126 {
        let mut term: u128 = 1;
        let mut sum: u128 = 1;
        for i in 0..m {
            term = term * u128::from(n - i) / u128::from(i + 1);
            sum += term;
        }
        sum as f64 / 2f64.powi(n as i32)
    } else {
        let ln2 = std::f64::consts::LN_2;
        let (mut ln_c, mut sum) = (0.0f64, 0.0f64);
        for i in 0..=m {
            if i > 0 {
                ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
            }
            sum += (ln_c - n as f64 * ln2).exp();
        }
        sum
    };
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Six documents under three setups (rows: documents; 1 = right):
    /// [1,1,1] [1,1,0] [1,0,0] [1,1,0] [0,0,0] [1,0,1]: C = (5, 3, 2), N = 10,
    /// R = (3, 2, 1, 2, 0, 2). k sum C^2 - N^2 = 3 x 38 - 100 = 14; numerator 2 x 14 = 28;
    /// k N - sum R^2 = 30 - 22 = 8; Q = 3.5; p = P(chi2(2) >= 3.5) = e^-1.75.
    #[test]
    fn cochran_by_hand() {
        let r = cochran_q(&[5, 3, 2], &[3, 2, 1, 2, 0, 2]).unwrap();
        assert_eq!((r.q, r.df), (3.5, 2));
        assert!((r.p_value - (-1.75f64).exp()).abs() < 1e-15);
        // Concordant documents only: Q = 0, p = 1.
        let r = cochran_q(&[2, 2, 2], &[3, 0, 3, 0]).unwrap();
        assert_eq!((r.q, r.p_value), (0.0, 1.0));
        // k = 2: Cochran's Q is McNemar's chi-square (b - c)^2 / (b + c), here b = 1, c = 8.
        let r = cochran_q(&[3, 10], &[2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]).unwrap();
        assert!((r.q - 49.0 / 9.0).abs() < 1e-15, "{}", r.q);
    }

    #[test]
    fn cochran_refuses_bad_shapes() {
        assert!(cochran_q(&[1], &[1]).is_err());
        assert!(cochran_q(&[1, 1], &[3]).is_err());
        assert!(cochran_q(&[1, 1], &[1]).is_err());
    }

    #[test]
    fn mcnemar_by_hand() {
        // b = 1, c = 8: 2 (C(9,0) + C(9,1)) / 2^9 = 20 / 512.
        assert_eq!(mcnemar_exact(1, 8), 20.0 / 512.0);
        assert_eq!(mcnemar_exact(8, 1), 20.0 / 512.0);
        assert_eq!(mcnemar_exact(0, 5), 2.0 / 32.0);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // Both branches agree where they meet.
        let exact = mcnemar_exact(40, 86);
        let mut ln_c = 0.0f64;
        let mut s = 0.0f64;
        for i in 0..=40u64 {
            if i > 0 {
                ln_c += ((126 - i + 1) as f64).ln() - (i as f64).ln();
            }
            s += (ln_c - 126.0 * std::f64::consts::LN_2).exp();
        }
        assert!((exact - 2.0 * s).abs() < 1e-12 * exact);
        assert!(mcnemar_exact(100, 200) < 1e-8 && (mcnemar_exact(150, 151) - 1.0).abs() < 1e-9);
    }
}
