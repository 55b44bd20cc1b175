//! The cluster bootstrap over models, with a small generator that gives the same numbers on
//! every machine.

use crate::InferenceError;

/// Replicates of every bootstrap interval.
pub const BOOTSTRAP_REPLICATES: usize = 2000;

/// Seed of the generator of every bootstrap: the ASCII bytes of `protospr` read as a
/// big-endian integer (0x70726f746f737072 = 8102661225469669490). Each interval starts a fresh
/// generator from it, so an interval does not depend on which other intervals were computed.
pub const BOOTSTRAP_SEED: u64 = 0x7072_6f74_6f73_7072;

/// SplitMix64 (Steele, Lea and Flood 2014; the generator `java.util.SplittableRandom` and the
/// seeding of xoshiro use): state += 0x9e3779b97f4a7c15, then two xor-shift-multiply rounds.
/// Only wrapping 64-bit integer operations, so the stream is the same on every machine.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is the mix of `seed + 0x9e3779b97f4a7c15`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`), without bias: Lemire's multiply-shift, drawing
    /// again when the low half of `x * n` falls below `2^64 mod n`.
    pub fn below(&mut self, n: u64) -> u64 {
        Below::new(n).draw(self)
    }
}

/// [`SplitMix64::below`] for one `n`, with `2^64 mod n` (a division) computed once: the
/// bootstrap draws millions of indices below the same `n`.
#[derive(Debug, Clone, Copy)]
struct Below {
    n: u64,
    threshold: u64,
}

impl Below {
    fn new(n: u64) -> Below {
        assert!(n > 0, "below(0)");
        Below {
            n,
            threshold: n.wrapping_neg() % n,
        }
    }

    fn draw(self, rng: &mut SplitMix64) -> u64 {
        loop {
            let m = u128::from(rng.next_u64()) * u128::from(self.n);
            if (m as u64) >= self.threshold {
                return (m >> 64) as u64;
            }
        }
    }
}

/// The type-1 percentile (inverse of the empirical distribution function) of `sorted`
/// (ascending, non-empty) at `per_mille / 1000`: the value of rank `ceil(per_mille n / 1000)`
/// (1-based; rank 1 for a level of 0). For n = 2000: 2.5% is the 50th value, 97.5% the 1950th.
pub fn percentile(sorted: &[f64], per_mille: usize) -> f64 {
    let n = sorted.len();
    let rank = (per_mille * n).div_ceil(1000).max(1);
    sorted[rank - 1]
}

/// `estimate` with the 2.5% and 97.5% percentiles ([`percentile`]) of the replicates `reps`
/// where the statistic is defined.
fn interval(estimate: Option<f64>, mut reps: Vec<f64>) -> BootstrapInterval {
    reps.sort_by(f64::total_cmp);
    BootstrapInterval {
        estimate,
        low: (!reps.is_empty()).then(|| percentile(&reps, 25)),
        high: (!reps.is_empty()).then(|| percentile(&reps, 975)),
        replicates: reps.len(),
    }
}

/// A point estimate and its 95% percentile interval; `None` parts where undefined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BootstrapInterval {
    /// The statistic on the data as observed.
    pub estimate: Option<f64>,
    /// 2.5% percentile of the replicates where the statistic is defined.
    pub low: Option<f64>,
    /// 97.5% percentile of the same replicates.
    pub high: Option<f64>,
    /// Replicates where the statistic is defined (at most [`BOOTSTRAP_REPLICATES`]).
    pub replicates: usize,
}

/// The two headline statistics of [`cluster_bootstrap`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BootstrapHeadline {
    /// Share of compared cells with protocol SD > sampling SD.
    pub share: BootstrapInterval,
    /// Median ratio over cells with a ratio.
    pub median_ratio: BootstrapInterval,
}

/// Values in a block of [`weighted_median`]'s scan: a block's weight is summed without a
/// branch per value, and only the block holding the position is walked value by value.
const BLOCK: usize = 64;

/// The weighted position `pos` (0-based) of `values` sorted ascending (total order), `cluster[i]`
/// the cluster of `values[i]`, each value counted `weights[cluster]` times, searched from index
/// `i` with `seen` the weight of the values before it: the index holding that position and the
/// weight up to and including it.
fn locate(cluster: &[u32], weights: &[u32], pos: u64, mut i: usize, mut seen: u64) -> (usize, u64) {
    while let Some(block) = cluster.get(i..i + BLOCK) {
        let w: u64 = block.iter().map(|&c| u64::from(weights[c as usize])).sum();
        if seen + w > pos {
            break;
        }
        seen += w;
        i += BLOCK;
    }
    loop {
        seen += u64::from(weights[cluster[i] as usize]);
        if seen > pos {
            return (i, seen);
        }
        i += 1;
    }
}

/// The median of a weighted multiset of total weight `total` (see [`locate`]): the middle value
/// for an odd total weight T, else the mean of the values at 0-based positions T/2 - 1 and
/// T/2. `None` when T = 0.
fn weighted_median(values: &[f64], cluster: &[u32], weights: &[u32], total: u64) -> Option<f64> {
    if total == 0 {
        return None;
    }
    let (lo_pos, hi_pos) = ((total - 1) / 2, total / 2);
    let (i, seen) = locate(cluster, weights, lo_pos, 0, 0);
    let a = values[i];
    let b = if seen > hi_pos {
        a
    } else {
        values[locate(cluster, weights, hi_pos, i + 1, seen).0]
    };
    Some(if a == b { a } else { (a + b) / 2.0 })
}

/// Cluster bootstrap of the headline statistics over the clusters (models) of a set of cells.
///
/// Cell `i` belongs to cluster `cluster[i]` (in `0..clusters`), has `gt[i]` (protocol SD >
/// sampling SD, `None` when the cell has no sampling SD and is not compared) and `ratio[i]`
/// (`None` when undefined). Replicate b = 1..B draws `clusters` cluster indices uniformly with
/// replacement ([`SplitMix64::below`], generator seeded with `seed`, draws in replicate order)
/// and takes every cell of each drawn cluster as often as the cluster was drawn. On the
/// replicate: share = (sum of drawn `gt` = true) / (drawn compared cells); median ratio = the
/// median (even count: mean of the two middle values; +inf ranks above every number) of the
/// drawn ratios. The interval is the type-1 2.5% and 97.5% percentiles ([`percentile`]) of
/// the replicates where the statistic is defined. Cluster numbers must be assigned in a fixed
/// order (the stage numbers models by id), so the result depends only on the data and `seed`.
pub fn cluster_bootstrap(
    clusters: usize,
    cluster: &[usize],
    gt: &[Option<bool>],
    ratio: &[Option<f64>],
    replicates: usize,
    seed: u64,
) -> Result<BootstrapHeadline, InferenceError> {
    if cluster.len() != gt.len() || cluster.len() != ratio.len() {
        return Err(InferenceError::Shape(format!(
            "cluster_bootstrap: {} clusters, {} flags, {} ratios",
            cluster.len(),
            gt.len(),
            ratio.len()
        )));
    }
    if u32::try_from(clusters).is_err() {
        return Err(InferenceError::Shape(format!(
            "cluster_bootstrap: {clusters} clusters"
        )));
    }
    if let Some(c) = cluster.iter().find(|&&c| c >= clusters) {
        return Err(InferenceError::Shape(format!(
            "cluster_bootstrap: cluster {c} of {clusters}"
        )));
    }
    // Per cluster: compared cells, cells with protocol SD > sampling SD, cells with a ratio.
    // A replicate adds a drawn cluster's counts once per draw: exact integer sums.
    let mut counts = vec![[0u64; 3]; clusters];
    for ((&c, g), r) in cluster.iter().zip(gt).zip(ratio) {
        if let Some(g) = g {
            counts[c][0] += 1;
            counts[c][1] += u64::from(*g);
        }
        counts[c][2] += u64::from(r.is_some());
    }
    let mut pairs: Vec<(f64, usize)> = cluster
        .iter()
        .zip(ratio)
        .filter_map(|(&c, r)| r.map(|r| (r, c)))
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let values: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let owner: Vec<u32> = pairs.iter().map(|p| p.1 as u32).collect();
    let share_of = |[n, k, _]: [u64; 3]| (n > 0).then(|| k as f64 / n as f64);
    let all = counts
        .iter()
        .fold([0u64; 3], |t, c| [t[0] + c[0], t[1] + c[1], t[2] + c[2]]);
    let estimates = (
        share_of(all),
        weighted_median(&values, &owner, &vec![1; clusters], all[2]),
    );
    let mut rng = SplitMix64::new(seed);
    let (mut shares, mut medians) = (Vec::new(), Vec::new());
    let mut w = vec![0u32; clusters];
    if clusters > 0 {
        let draw = Below::new(clusters as u64);
        for _ in 0..replicates {
            w.fill(0);
            let mut drawn = [0u64; 3];
            for _ in 0..clusters {
                let c = draw.draw(&mut rng) as usize;
                w[c] += 1;
                drawn = [
                    drawn[0] + counts[c][0],
                    drawn[1] + counts[c][1],
                    drawn[2] + counts[c][2],
                ];
            }
            shares.extend(share_of(drawn));
            medians.extend(weighted_median(&values, &owner, &w, drawn[2]));
        }
    }
    Ok(BootstrapHeadline {
        share: interval(estimates.0, shares),
        median_ratio: interval(estimates.1, medians),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference outputs of SplitMix64 for seed 1234567 (from the C reference
    /// implementation by Vigna, splitmix64.c).
    #[test]
    fn splitmix64_reference_stream() {
        let mut g = SplitMix64::new(1_234_567);
        let got: Vec<u64> = (0..5).map(|_| g.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423,
                4_593_380_528_125_082_431,
                16_408_922_859_458_223_821
            ]
        );
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut g = SplitMix64::new(BOOTSTRAP_SEED);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[g.below(7) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn percentiles_of_two_thousand() {
        let v: Vec<f64> = (1..=2000).map(f64::from).collect();
        assert_eq!(percentile(&v, 25), 50.0);
        assert_eq!(percentile(&v, 975), 1950.0);
        assert_eq!(percentile(&v, 0), 1.0);
        assert_eq!(percentile(&[3.0], 975), 3.0);
    }

    /// [`weighted_median`] with the total weight it is given computed here.
    fn wmedian(v: &[f64], c: &[u32], w: &[u32]) -> Option<f64> {
        let total = c.iter().map(|&c| u64::from(w[c as usize])).sum();
        weighted_median(v, c, w, total)
    }

    #[test]
    fn weighted_median_even_odd_and_infinite() {
        let (v, c) = ([1.0, 2.0, f64::INFINITY], [0, 1, 2]);
        assert_eq!(wmedian(&v, &c, &[1, 1, 1]), Some(2.0));
        assert_eq!(wmedian(&v, &c, &[1, 1, 0]), Some(1.5));
        assert_eq!(wmedian(&v, &c, &[0, 1, 1]), Some(f64::INFINITY));
        assert_eq!(wmedian(&v, &c, &[2, 0, 1]), Some(1.0));
        assert_eq!(wmedian(&v, &c, &[0, 0, 0]), None);
    }

    #[test]
    fn the_estimate_is_the_plain_statistic_and_identical_clusters_give_a_point() {
        // Two identical models: every replicate equals the data.
        let h = cluster_bootstrap(
            2,
            &[0, 0, 1, 1],
            &[Some(true), Some(false), Some(true), Some(false)],
            &[Some(3.0), Some(1.0), Some(3.0), Some(1.0)],
            200,
            BOOTSTRAP_SEED,
        )
        .unwrap();
        assert_eq!(h.share.estimate, Some(0.5));
        assert_eq!((h.share.low, h.share.high), (Some(0.5), Some(0.5)));
        assert_eq!(h.median_ratio.estimate, Some(2.0));
        assert_eq!(h.median_ratio.replicates, 200);
        // A model whose cells all exceed and one whose cells never do: the interval spans.
        let split = || {
            cluster_bootstrap(
                2,
                &[0, 1],
                &[Some(true), Some(false)],
                &[Some(4.0), Some(0.5)],
                2000,
                BOOTSTRAP_SEED,
            )
            .unwrap()
        };
        let h = split();
        assert_eq!((h.share.low, h.share.high), (Some(0.0), Some(1.0)));
        // Same seed, same result; the input must fit together.
        assert_eq!(h, split());
        assert!(cluster_bootstrap(1, &[0, 1], &[None, None], &[None, None], 1, 1).is_err());
    }

    /// The bootstrap written plainly: each replicate lists its drawn cells and takes the share
    /// and the median of that list (sorted), as the documentation states them.
    fn reference(
        clusters: usize,
        cluster: &[usize],
        gt: &[Option<bool>],
        ratio: &[Option<f64>],
        replicates: usize,
    ) -> BootstrapHeadline {
        let stats = |w: &[u64]| {
            let (mut n, mut k, mut r) = (0u64, 0u64, Vec::new());
            for ((&c, g), x) in cluster.iter().zip(gt).zip(ratio) {
                for _ in 0..w[c] {
                    if let Some(g) = g {
                        n += 1;
                        k += u64::from(*g);
                    }
                    r.extend(*x);
                }
            }
            r.sort_by(f64::total_cmp);
            let m = r.len();
            let median = (m > 0).then(|| {
                let (a, b) = (r[(m - 1) / 2], r[m / 2]);
                if a == b {
                    a
                } else {
                    (a + b) / 2.0
                }
            });
            ((n > 0).then(|| k as f64 / n as f64), median)
        };
        let mut rng = SplitMix64::new(BOOTSTRAP_SEED);
        let (mut shares, mut medians) = (Vec::new(), Vec::new());
        for _ in 0..replicates {
            let mut w = vec![0u64; clusters];
            for _ in 0..clusters {
                w[rng.below(clusters as u64) as usize] += 1;
            }
            let (s, m) = stats(&w);
            shares.extend(s);
            medians.extend(m);
        }
        let (s, m) = stats(&vec![1; clusters]);
        BootstrapHeadline {
            share: interval(s, shares),
            median_ratio: interval(m, medians),
        }
    }

    proptest! {
        #[test]
        fn matches_the_plain_bootstrap(
            cells in prop::collection::vec((0usize..40, prop::option::of(any::<bool>()), prop::option::of(0u8..12)), 0..300),
            clusters in 1usize..40,
        ) {
            let cluster: Vec<usize> = cells.iter().map(|c| c.0 % clusters).collect();
            let gt: Vec<Option<bool>> = cells.iter().map(|c| c.1).collect();
            // Few distinct ratios, so that ties and +inf are common.
            let ratio: Vec<Option<f64>> = cells
                .iter()
                .map(|c| c.2.map(|x| if x == 11 { f64::INFINITY } else { f64::from(x) / 4.0 }))
                .collect();
            let fast = cluster_bootstrap(clusters, &cluster, &gt, &ratio, 50, BOOTSTRAP_SEED).unwrap();
            let plain = reference(clusters, &cluster, &gt, &ratio, 50);
            prop_assert_eq!(format!("{fast:?}"), format!("{plain:?}"));
        }

        #[test]
        fn weighted_median_matches_the_expanded_list(
            items in prop::collection::vec((0u32..300, 0u32..8), 1..400),
            weights in prop::collection::vec(0u32..4, 8),
        ) {
            // Long enough lists cross several blocks of the scan.
            let mut items = items;
            items.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
            let v: Vec<f64> = items.iter().map(|i| f64::from(i.0)).collect();
            let c: Vec<u32> = items.iter().map(|i| i.1).collect();
            let mut all: Vec<f64> = Vec::new();
            for (x, &k) in v.iter().zip(&c) {
                all.extend(std::iter::repeat_n(*x, weights[k as usize] as usize));
            }
            let m = all.len();
            let want = (m > 0).then(|| (all[(m - 1) / 2] + all[m / 2]) / 2.0);
            prop_assert_eq!(wmedian(&v, &c, &weights), want);
        }
    }
}
