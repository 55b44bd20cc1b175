//! Property tests of the scorer against the main key.

use proptest::prelude::*;
use protospread_score::{score, Mutation, ScoringKey};
use std::path::Path;

fn key() -> ScoringKey {
    ScoringKey::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/scoring_key.csv"))
        .unwrap()
}

const TESTS: [(&str, usize); 4] = [
    ("big_five", 50),
    ("riasec", 60),
    ("dark_triad", 18),
    ("multiple_intelligences", 40),
];

/// A straightforward re-implementation: integer point sums, then the product's rounding, then
/// a sort for top_result. Written from the rule in docs/scoring-key.md, not from scorer.rs.
fn reference(k: &ScoringKey, test: &str, answers: &[u8]) -> (Vec<f64>, String) {
    let tk = k.test(test).unwrap();
    let mut vals = Vec::new();
    for d in 0..tk.dims.len() {
        let mut pts: i64 = 0;
        let mut max: i64 = 0;
        for (i, it) in tk.items.iter().enumerate() {
            if it.dim != d {
                continue;
            }
            assert_eq!(it.weight, 1.0);
            max += 4;
            let a = answers[i] as i64;
            if a <= 4 {
                pts += if it.reverse { 4 - a } else { a };
            }
        }
        let x = pts as f64 / max as f64 * 100.0;
        vals.push((x + 0.5).floor());
    }
    let mut order: Vec<usize> = (0..vals.len()).collect();
    order.sort_by(|&a, &b| {
        vals[b]
            .partial_cmp(&vals[a])
            .unwrap()
            .then(tk.dims[a].tie_rank.cmp(&tk.dims[b].tie_rank))
    });
    let top = order[..tk.top_n]
        .iter()
        .map(|&i| tk.dims[i].name.clone())
        .collect();
    (vals, top)
}

fn answers_strategy() -> impl Strategy<Value = (usize, Vec<u8>)> {
    (0usize..4).prop_flat_map(|t| (Just(t), proptest::collection::vec(0u8..=6, TESTS[t].1)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn agrees_with_reference((t, a) in answers_strategy()) {
        let k = key();
        let test = TESTS[t].0;
        let s = score(&k, test, &a.iter().map(|&x| Some(x)).collect::<Vec<_>>()).unwrap();
        let (vals, top) = reference(&k, test, &a);
        let got: Vec<f64> = s.dims.iter().map(|d| d.value.unwrap()).collect();
        prop_assert_eq!(got, vals);
        prop_assert_eq!(s.top_result.unwrap(), top);
    }

    #[test]
    fn scores_stay_in_range((t, a) in answers_strategy()) {
        let k = key();
        let s = score(&k, TESTS[t].0, &a.iter().map(|&x| Some(x)).collect::<Vec<_>>()).unwrap();
        for d in &s.dims {
            let v = d.value.unwrap();
            prop_assert!((0.0..=100.0).contains(&v) && v.fract() == 0.0, "{}", v);
            prop_assert_eq!(d.n_items, d.n_answered);
        }
    }

    /// Reversing every item and mirroring every answer (a -> 4 - a) gives the same scores.
    #[test]
    fn reverse_keying_is_symmetric((t, a) in answers_strategy()) {
        let test = TESTS[t].0;
        let k = key();
        let mut flipped = k.clone();
        for item in 1..=TESTS[t].1 {
            flipped = flipped.mutated(test, item, Mutation::FlipReverse).unwrap();
        }
        let a: Vec<u8> = a.iter().map(|&x| x.min(4)).collect();
        let mirrored: Vec<Option<u8>> = a.iter().map(|&x| Some(4 - x)).collect();
        let s1 = score(&k, test, &a.iter().map(|&x| Some(x)).collect::<Vec<_>>()).unwrap();
        let s2 = score(&flipped, test, &mirrored).unwrap();
        prop_assert_eq!(s1, s2);
    }

    /// A missing item removes its dimension's value (and top_result) and nothing else.
    #[test]
    fn missing_item_blanks_only_its_dimension((t, a) in answers_strategy(), pick in 0usize..60) {
        let test = TESTS[t].0;
        let k = key();
        let i = pick % TESTS[t].1;
        let full: Vec<Option<u8>> = a.iter().map(|&x| Some(x)).collect();
        let mut gap = full.clone();
        gap[i] = None;
        let s1 = score(&k, test, &full).unwrap();
        let s2 = score(&k, test, &gap).unwrap();
        let dim = k.test(test).unwrap().items[i].dim;
        prop_assert!(s2.top_result.is_none());
        for (d, (x, y)) in s1.dims.iter().zip(&s2.dims).enumerate() {
            if d == dim {
                prop_assert!(y.value.is_none());
                prop_assert_eq!(y.n_answered + 1, y.n_items);
            } else {
                prop_assert_eq!(x, y);
            }
        }
    }

    /// An out-of-range answer counts like a 0 on a forward item (no points), whatever its value.
    #[test]
    fn out_of_range_earns_nothing((t, a) in answers_strategy(), pick in 0usize..60, v in 5u8..=255) {
        let test = TESTS[t].0;
        let k = key();
        let i = pick % TESTS[t].1;
        let mut x: Vec<Option<u8>> = a.iter().map(|&x| Some(x)).collect();
        x[i] = Some(v);
        let mut y = x.clone();
        let it = &k.test(test).unwrap().items[i];
        // 0 on a forward item and 4 on a reversed one both earn 0 points.
        y[i] = Some(if it.reverse { 4 } else { 0 });
        prop_assert_eq!(score(&k, test, &x).unwrap(), score(&k, test, &y).unwrap());
    }
}

#[test]
fn product_rounding_to_the_last_bit() {
    // 23 of 40 points: 23/40*100 is 57.49999999999999 in f64, so the product stores 57.
    let k = key();
    let mut a = vec![Some(0u8); 18];
    for i in [1usize, 4, 7, 10, 13] {
        a[i] = Some(4); // machiavellianism items 2,5,8,11,14 -> 20 of 24
    }
    a[16] = Some(3); // item 17 -> 23 of 24: 95.83 -> 96
    let s = score(&k, "dark_triad", &a).unwrap();
    assert_eq!(s.dims[0].dimension, "machiavellianism");
    assert_eq!(s.dims[0].value, Some(96.0));
    assert_eq!(s.top_result.as_deref(), Some("machiavellianism"));
    // Big Five E = items 1,6,11,... with 6,16,26,36,46 reversed.
    let mut b = vec![Some(2u8); 50];
    b[0] = Some(3); // E: 10 items at 2 points = 20; item 1 at 3 -> 21
    b[10] = Some(4); // item 11 -> +2 -> 23
    let s = score(&k, "big_five", &b).unwrap();
    let e = s.dims.iter().find(|d| d.dimension == "E").unwrap();
    assert_eq!(e.value, Some(57.0), "23/40*100 rounds to 57 in f64");
    // All other dimensions 20/40 = 50: ties broken O, C, E, A, N; E wins outright here.
    assert_eq!(s.top_result.as_deref(), Some("E"));
    let flat = score(&k, "big_five", &[Some(2u8); 50]).unwrap();
    assert_eq!(flat.top_result.as_deref(), Some("O"));
}

#[test]
fn wrong_length_and_unknown_test_are_errors() {
    let k = key();
    assert!(score(&k, "big_five", &[Some(1)]).is_err());
    assert!(score(&k, "mbti", &[Some(1); 60]).is_err());
}
