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

/// Dense ranks of `x` (0 for the lowest value, equal values one rank) and the positions in
/// ascending order of value (ties by position): Kendall's tau-b depends only on the order, so
/// it is computed on these (exact: the values are compared as fractions once, here).
fn dense_ranks(x: &[Fraction]) -> (Vec<u32>, Vec<u32>) {
    let mut order: Vec<u32> = (0..x.len() as u32).collect();
    order.sort_by(|&a, &b| x[a as usize].cmp(&x[b as usize]));
    let mut ranks = vec![0u32; x.len()];
    let mut r = 0;
    for (i, &m) in order.iter().enumerate() {
        if i > 0 && x[order[i - 1] as usize] != x[m as usize] {
            r += 1;
        }
        ranks[m as usize] = r;
    }
    (ranks, order)
}

/// One sample's order, computed once for all the pairs it is in (see [`tau_b_of`]).
struct Ranked {
    /// Dense rank of each item.
    ranks: Vec<u32>,
    /// Items in ascending order of rank.
    order: Vec<u32>,
    /// Pairs of items tied in rank.
    tied: u64,
}

impl Ranked {
    /// The items in ascending order, a group of tied ones at a time.
    fn groups(&self) -> std::slice::ChunkBy<'_, u32, impl FnMut(&u32, &u32) -> bool + '_> {
        self.order
            .chunk_by(|&a, &b| self.ranks[a as usize] == self.ranks[b as usize])
    }

    /// Distinct values: one more than the highest dense rank, 0 for no items.
    fn values(&self) -> usize {
        self.order
            .last()
            .map_or(0, |&m| self.ranks[m as usize] as usize + 1)
    }

    fn of(x: &[Fraction]) -> Ranked {
        let (ranks, order) = dense_ranks(x);
        let tied = ties_in(&order, |&a, &b| ranks[a as usize] == ranks[b as usize]);
        Ranked { ranks, order, tied }
    }
}

/// Kendall's tau-b of two paired samples (values compared exactly):
/// `(C - D) / sqrt((n0 - n1) (n0 - n2))` with C concordant and D discordant pairs, n0 =
/// n (n - 1) / 2, n1 and n2 the pairs tied in `x` and in `y`. A pair tied in either is neither
/// concordant nor discordant. `None` when `x` or `y` is constant (or n < 2): the denominator
/// is 0. Computed as C - D = n0 - n1 - n2 + n3 - 2 D with n3 the pairs tied in both (Knight's
/// identity), D counted in O(n log n): items in ascending order of x, a group of equal x at a
/// time, each counting the earlier items (lower x) of higher y in a Fenwick tree over the
/// ranks of y.
pub fn kendall_tau_b(x: &[Fraction], y: &[Fraction]) -> Option<f64> {
    assert_eq!(x.len(), y.len(), "kendall_tau_b of unequal lengths");
    tau_b_of(&Ranked::of(x), &Ranked::of(y), &mut Vec::new())
}

/// [`kendall_tau_b`] of two ranked samples; `tree` is scratch space.
fn tau_b_of(x: &Ranked, y: &Ranked, tree: &mut Vec<u32>) -> Option<f64> {
    let n = x.ranks.len() as u64;
    let n0 = tied_pairs(n);
    let (n1, n2) = (x.tied, y.tied);
    let (a, b) = (n0 - n1, n0 - n2);
    if a == 0 || b == 0 {
        return None;
    }
    // Fenwick tree over y's ranks, 1-based: tree[i] counts the inserted items of ranks
    // (i - lowbit(i), i].
    let size = y.values();
    tree.clear();
    tree.resize(size + 1, 0);
    let (mut inserted, mut discordant, mut n3) = (0u64, 0u64, 0u64);
    let order = &x.order;
    let mut i = 0;
    while i < order.len() {
        let rx = x.ranks[order[i] as usize];
        let j = i + order[i..]
            .iter()
            .take_while(|&&m| x.ranks[m as usize] == rx)
            .count();
        for &m in &order[i..j] {
            // Earlier items with a rank of y at most this one's: the prefix sum up to it.
            let mut k = y.ranks[m as usize] as usize + 1;
            let mut not_higher = 0u64;
            while k > 0 {
                not_higher += u64::from(tree[k]);
                k &= k - 1;
            }
            discordant += inserted - not_higher;
        }
        if j - i > 1 {
            n3 += ties_of_y(&order[i..j], &y.ranks);
        }
        for &m in &order[i..j] {
            let mut k = y.ranks[m as usize] as usize + 1;
            while k <= size {
                tree[k] += 1;
                k += k & k.wrapping_neg();
            }
        }
        inserted += (j - i) as u64;
        i = j;
    }
    let num = i128::from(n0) - i128::from(n1) - i128::from(n2) + i128::from(n3)
        - 2 * i128::from(discordant);
    Some(num as f64 / ((u128::from(a) * u128::from(b)) as f64).sqrt())
}

/// Pairs of `items` (a group tied in x) tied in y too.
fn ties_of_y(items: &[u32], y: &[u32]) -> u64 {
    let mut ys: Vec<u32> = items.iter().map(|&m| y[m as usize]).collect();
    ys.sort_unstable();
    ties_in(&ys, |a, b| a == b)
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
/// Flips are counted as the pairs less those where one model is at least the other in every
/// setup ([`flipped_pairs`]).
pub fn ranking(scores: &[Vec<Fraction>]) -> Result<Ranking, InferenceError> {
    let setups = scores.len();
    let models = scores.first().map_or(0, Vec::len);
    if let Some(s) = scores.iter().find(|s| s.len() != models) {
        return Err(InferenceError::Shape(format!(
            "a setup scores {} models, another {models}",
            s.len()
        )));
    }
    let ranked: Vec<Ranked> = scores.iter().map(|s| Ranked::of(s)).collect();
    let mut taus = Vec::new();
    let mut tree = Vec::new();
    for a in 0..setups {
        for b in a + 1..setups {
            taus.extend(tau_b_of(&ranked[a], &ranked[b], &mut tree));
        }
    }
    let setup_pairs = taus.len();
    let tau_min = taus.iter().copied().min_by(f64::total_cmp);
    let tau_median = median(&mut taus);
    let mut can_lead = vec![false; models];
    for r in &ranked {
        for &m in r.groups().next_back().unwrap_or_default() {
            can_lead[m as usize] = true;
        }
    }
    let rows = ranked.iter().map(Ranked::values).sum();
    let flipped_pairs = flipped_pairs(&ranked, block_words(rows, models, FLIP_BYTES));
    Ok(Ranking {
        setups,
        models,
        setup_pairs,
        tau_median,
        tau_min,
        model_pairs: tied_pairs(models as u64),
        flipped_pairs,
        can_lead,
    })
}

/// Memory for the tables of [`flipped_pairs`]: about this many bytes, whatever the number of
/// models and values (at least one 64-bit word per value and direction). A block's tables are
/// only read while every model is compared with its partners, and mostly from the cache (the
/// models come in nearly the tables' order); rows of partners per model, written once per
/// setup, made the count of a scale of 119,000 models wait on memory.
const FLIP_BYTES: usize = 32 << 20;

/// Words of partners that [`flipped_pairs`] takes at a time within `bytes`, given `levels`
/// rows (the distinct values of every setup): two bitsets of that many words per row, at
/// least one word, at most every model.
fn block_words(levels: usize, models: usize, bytes: usize) -> usize {
    (bytes / (16 * levels.max(1))).clamp(1, models.div_ceil(64).max(1))
}

/// Pairs of models that one setup puts strictly above and another strictly below each other.
/// A pair does not flip when one model is at least the other in every setup, so the flips are
/// the pairs less those comparable that way. For a block of `words` x 64 partners, each setup
/// has, per value of its own, the partners at most that value and those at least that value
/// as bitsets; a model's partners at most it everywhere are the AND of its values' rows over
/// the setups, and likewise at least. Summed over the models, the partners at most or at least
/// (both when equal everywhere) count every comparable pair twice and each model once, with
/// itself. The tables of a block are small and read-only, so every model's comparison with the
/// block runs from the cache.
fn flipped_pairs(ranked: &[Ranked], words: usize) -> u64 {
    let Some(first) = ranked.first() else {
        return 0;
    };
    let (models, setups) = (first.ranks.len(), ranked.len());
    // A row per model: its value (dense rank) in each setup, for one read per model. Models
    // are numbered by their place in the first setup's order: the setups' orders are alike,
    // so going through the models in that order reads each setup's table rows nearly in
    // memory order.
    let mut level = vec![0u32; models * setups];
    for (place, &m) in first.order.iter().enumerate() {
        for (s, r) in ranked.iter().enumerate() {
            level[place * setups + s] = r.ranks[m as usize];
        }
    }
    // Where each setup's rows start in the tables.
    let mut start = Vec::with_capacity(setups + 1);
    start.push(0usize);
    for r in ranked {
        start.push(start[start.len() - 1] + r.values());
    }
    let rows = start[setups];
    let total = models.div_ceil(64);
    let (mut at_most, mut at_least) = (vec![0u64; rows * words], vec![0u64; rows * words]);
    let (mut below, mut above) = (vec![0u64; words], vec![0u64; words]);
    let mut counted = 0u64;
    let mut lo = 0;
    while lo < total {
        let w = words.min(total - lo);
        let block = lo * 64..((lo + w) * 64).min(models);
        let (at_most, at_least) = (&mut at_most[..rows * w], &mut at_least[..rows * w]);
        at_most.fill(0);
        for b in block.clone() {
            let bit = b - block.start;
            for (s, &k) in level[b * setups..(b + 1) * setups].iter().enumerate() {
                at_most[(start[s] + k as usize) * w + bit / 64] |= 1 << (bit % 64);
            }
        }
        // So far each row holds the partners at exactly its value: cumulate up and down.
        at_least.copy_from_slice(at_most);
        for s in 0..setups {
            for k in start[s] + 1..start[s + 1] {
                let (lower, row) = at_most.split_at_mut(k * w);
                or_into(&mut row[..w], &lower[(k - 1) * w..]);
            }
            for k in (start[s]..start[s + 1].saturating_sub(1)).rev() {
                let (row, higher) = at_least.split_at_mut((k + 1) * w);
                or_into(&mut row[k * w..], &higher[..w]);
            }
        }
        let (below, above) = (&mut below[..w], &mut above[..w]);
        for m in 0..models {
            below.fill(!0);
            above.fill(!0);
            for (s, &k) in level[m * setups..(m + 1) * setups].iter().enumerate() {
                let row = (start[s] + k as usize) * w;
                and_into(below, &at_most[row..row + w]);
                and_into(above, &at_least[row..row + w]);
            }
            counted += below
                .iter()
                .zip(above.iter())
                .map(|(d, u)| u64::from(d.count_ones() + u.count_ones() - (d & u).count_ones()))
                .sum::<u64>();
        }
        lo += w;
    }
    tied_pairs(models as u64) - (counted - models as u64) / 2
}

fn or_into(dst: &mut [u64], src: &[u64]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d |= s);
}

fn and_into(dst: &mut [u64], src: &[u64]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d &= s);
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
    fn flip_tables_stay_within_their_budget() {
        // Two bitsets of `words` per row (a value of a setup): within the bytes given, at
        // least a word each, at most every model.
        assert_eq!(block_words(53_076, 119_000, FLIP_BYTES), 39);
        assert!(2 * 8 * 53_076 * block_words(53_076, 119_000, FLIP_BYTES) <= FLIP_BYTES);
        assert_eq!(block_words(1_010, 119_000, FLIP_BYTES), 1_860);
        assert_eq!(block_words(10, 70, FLIP_BYTES), 2);
        assert_eq!(block_words(0, 0, FLIP_BYTES), 1);
        assert_eq!(block_words(10_000_000, 1_000_000, FLIP_BYTES), 1);
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
            // A partner at a time (70 models: two words, the second partly used).
            let ranked: Vec<Ranked> = scores.iter().map(|s| Ranked::of(s)).collect();
            prop_assert_eq!(flipped_pairs(&ranked, 1), flips);
            for m in 0..70 {
                let leads = s.iter().any(|v| v.iter().all(|&o| o <= v[m]));
                prop_assert_eq!(r.can_lead[m], leads);
            }
        }
    }
}
