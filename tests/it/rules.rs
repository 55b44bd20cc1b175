//! The reply rules side by side (issue 13): the lenient rule's reply table next to the strict
//! one, whole-test replies under both rules, and the score stage's `reply_rules` table.

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int32Type;
use protospread_format::{OptionOrder, StoredRecord, Vocabulary};
use protospread_score::{
    read_single, read_single_lenient, read_whole, read_whole_lenient, Reading, ReplyRule, Status,
};
use protospread_score::{score_in_memory, Norms, ScoredInMemory, ScoringKey};
use protospread_testutils::{rows_of, ParsedRow};
use std::path::PathBuf;

use Status::*;

const fn r(status: Status, option: Option<i32>) -> Reading {
    Reading { option, status }
}
const NAN: Reading = r(NotANumber, None);
const fn ok(n: i32) -> Reading {
    r(Ok, Some(n))
}
const fn oor(n: i32) -> Reading {
    r(OutOfRange, Some(n))
}

/// (reply, strict reading, lenient reading): every reply of the strict rule's table
/// (`answers::TABLE`, checked below) and the decorated forms the lenient rule is for.
pub(crate) const TABLE: &[(&str, Reading, Reading)] = &[
    // the strict table
    ("", NAN, NAN),
    ("   ", NAN, NAN),
    ("\n\t ", NAN, NAN),
    ("3", ok(3), ok(3)),
    ("1", ok(1), ok(1)),
    ("5", ok(5), ok(5)),
    (" 3 ", ok(3), ok(3)),
    ("3\n", ok(3), ok(3)),
    ("\t4\r\n", ok(4), ok(4)),
    ("\u{a0}2\u{a0}", ok(2), ok(2)),
    ("3.", ok(3), ok(3)),
    ("3)", ok(3), ok(3)),
    ("03", ok(3), ok(3)),
    ("0", oor(0), oor(0)),
    ("6", oor(6), oor(6)),
    ("6.", oor(6), oor(6)),
    ("12", oor(12), oor(12)),
    ("00", oor(0), oor(0)),
    ("99999999999999999999", oor(i32::MAX), oor(i32::MAX)),
    ("3 - Moderately Accurate", NAN, ok(3)),
    ("Answer: 3", NAN, NAN),
    ("3/5", NAN, NAN),
    ("three", NAN, NAN),
    ("Three.", NAN, NAN),
    ("3 or 4", NAN, NAN),
    ("3, 4", NAN, NAN),
    ("3 4", NAN, NAN),
    ("(3)", NAN, NAN),
    ("**3**", NAN, NAN),
    ("`3`", NAN, NAN),
    ("\"3\"", NAN, NAN),
    ("3.0", NAN, NAN),
    ("3..", NAN, ok(3)),
    ("3.)", NAN, NAN),
    ("-3", NAN, NAN),
    ("+3", NAN, NAN),
    ("3!", NAN, ok(3)),
    ("#3", NAN, NAN),
    ("Option 3", NAN, NAN),
    ("3 (Neutral)", NAN, NAN),
    ("\u{ff13}", NAN, NAN),
    ("\u{0663}", NAN, NAN),
    ("\u{0969}", NAN, NAN),
    ("\u{2462}", NAN, NAN),
    ("III", NAN, NAN),
    ("I'm an AI language model and don't have personal feelings, so I can't rate this statement.", NAN, NAN),
    ("I cannot answer that.", NAN, NAN),
    ("Considering the statement carefully, I would say that on most days I feel this way, but there are 2 or 3 exceptions each week, so overall I lean towards agreeing with it moderately.", NAN, NAN),
    ("3\n\nExplanation: I am moderately accurate here.", NAN, NAN),
    ("1: 3", NAN, NAN),
    // decorated forms: a number, one separator, an option-like label
    ("4. Moderately Accurate", NAN, ok(4)),
    ("4)", ok(4), ok(4)),
    ("4: Accurate", NAN, ok(4)),
    ("4 - Moderately Accurate", NAN, ok(4)),
    ("4 Very Accurate!", NAN, ok(4)),
    ("4. Moderately Accurate.", NAN, ok(4)),
    ("  4.\tNeither Accurate Nor Inaccurate \n", NAN, ok(4)),
    ("4 :Accurate", NAN, ok(4)),
    ("4-", NAN, ok(4)),
    ("4:", NAN, ok(4)),
    ("4. Modérément", NAN, ok(4)),
    ("04. Moderately Accurate", NAN, ok(4)),
    // the label is not checked against the option (the labels shown are not stored)
    ("4. Very Inaccurate", NAN, ok(4)),
    ("4 and five", NAN, ok(4)),
    // out of range: read as the number, never ok
    ("6. Very Accurate", NAN, oor(6)),
    ("0) Never", NAN, oor(0)),
    ("12: Agree", NAN, oor(12)),
    ("7 Accurate", NAN, oor(7)),
    // two numbers, a second line, markup, other scripts, other punctuation
    ("4 5", NAN, NAN),
    ("4-5", NAN, NAN),
    ("4 and 5", NAN, NAN),
    ("4: 4", NAN, NAN),
    ("4. Moderately Accurate\n\nThe statement describes me.", NAN, NAN),
    ("1. Moderately Accurate\n2. Very Accurate", NAN, NAN),
    ("4. Moderately-Accurate", NAN, NAN),
    ("4 (Moderately Accurate)", NAN, NAN),
    ("**4. Moderately Accurate**", NAN, NAN),
    ("4 \u{2014} Moderately Accurate", NAN, NAN),
    ("4 ::", NAN, NAN),
    ("4. Accurate, mostly", NAN, NAN),
    ("Option 4. Moderately Accurate", NAN, NAN),
    ("\u{0663}. Moderately Accurate", NAN, NAN),
    ("\u{ff14}. Moderately Accurate", NAN, NAN),
    ("4\u{ff0e} Moderately Accurate", NAN, NAN),
];

#[test]
fn reply_table_under_both_rules() {
    for (reply, strict, lenient) in TABLE {
        assert_eq!(read_single(reply), *strict, "strict, reply {reply:?}");
        assert_eq!(ReplyRule::Strict.read_single(reply), *strict, "{reply:?}");
        assert_eq!(
            read_single_lenient(reply),
            *lenient,
            "lenient, reply {reply:?}"
        );
        assert_eq!(ReplyRule::Lenient.read_single(reply), *lenient, "{reply:?}");
    }
}

#[test]
fn every_strict_table_reply_is_in_the_lenient_table() {
    for (reply, status, option) in crate::answers::TABLE {
        let row = TABLE.iter().find(|(x, _, _)| x == reply);
        let Some((_, strict, _)) = row else {
            panic!("reply {reply:?} of the strict table is missing here");
        };
        assert_eq!(*strict, r(*status, *option), "{reply:?}");
    }
}

/// A whole-test reply for a 4-item test and the readings per shown position, strict then
/// lenient.
type WholeCase<'a> = (&'a str, [Reading; 4], [Reading; 4]);

#[test]
fn whole_reply_table_under_both_rules() {
    let miss = r(MissingInWhole, None);
    let dup = r(DuplicateInWhole, None);
    let cases: &[WholeCase] = &[
        (
            "1: 4. Moderately Accurate\n2) 2 - Moderately Inaccurate\n3. 5!\n4 = 1",
            [NAN, NAN, NAN, ok(1)],
            [ok(4), ok(2), ok(5), ok(1)],
        ),
        // SmolLM2's whole-test shape: option lines, not answers per statement
        (
            "1. Very Accurate\n2. Not Accurate\n3. Moderately Accurate",
            [NAN, NAN, NAN, miss],
            [NAN, NAN, NAN, miss],
        ),
        (
            "1: 4 or 5\n2: 6. Very Accurate\n3: 3\n3: 3. Neutral",
            [NAN, NAN, dup, miss],
            [NAN, oor(6), dup, miss],
        ),
        // the answer-line shape is the strict rule's under both rules
        (
            "Item 1: 4\n**2**: 3\n3 4\n4: 2",
            [miss, miss, miss, ok(2)],
            [miss, miss, miss, ok(2)],
        ),
        ("", [miss; 4], [miss; 4]),
    ];
    for (reply, strict, lenient) in cases {
        assert_eq!(read_whole(reply, 4), strict.to_vec(), "strict, {reply:?}");
        assert_eq!(
            read_whole_lenient(reply, 4),
            lenient.to_vec(),
            "lenient, {reply:?}"
        );
        assert_eq!(ReplyRule::Strict.read_whole(reply, 4), strict.to_vec());
        assert_eq!(ReplyRule::Lenient.read_whole(reply, 4), lenient.to_vec());
    }
}

fn record(condition: &str, item: Option<i32>, reply: &str, error: Option<&str>) -> StoredRecord {
    let mut r = protospread_testutils::local_request("riasec", 60, condition, 1, item, reply);
    r.error = error.map(str::to_string);
    r
}

/// (condition, mode, rule, requests, readable_replies, items, readable_items)
type RuleRow = (String, String, String, i32, i32, i32, i32);

/// The records scored as source `src` labelled `recorded`, with the repository's key.
fn score_recorded(records: &[StoredRecord]) -> ScoredInMemory {
    let key =
        ScoringKey::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/scoring_key.csv"))
            .unwrap();
    score_in_memory(
        "src",
        Some("recorded"),
        records,
        &Vocabulary::default(),
        &key,
        &Norms::default(),
        &[],
    )
    .unwrap()
}

fn rule_rows(batches: &[RecordBatch], model: &str) -> Vec<RuleRow> {
    let mut out = Vec::new();
    for b in batches {
        let s = |n: &str, i: usize| {
            b.column_by_name(n)
                .unwrap()
                .as_string::<i32>()
                .value(i)
                .to_string()
        };
        let n = |c: &str, i: usize| {
            b.column_by_name(c)
                .unwrap()
                .as_primitive::<Int32Type>()
                .value(i)
        };
        for i in 0..b.num_rows() {
            assert_eq!(
                (s("source", i), s("label", i), s("model", i), s("arm", i)),
                (
                    "src".into(),
                    "recorded".into(),
                    model.into(),
                    "local".into()
                )
            );
            out.push((
                s("condition", i),
                s("mode", i),
                s("rule", i),
                n("requests", i),
                n("readable_replies", i),
                n("items", i),
                n("readable_items", i),
            ));
        }
    }
    out
}

#[test]
fn reply_rule_table_counts_requests_replies_and_items() {
    let whole = |f: &dyn Fn(usize) -> String| {
        (1..=60)
            .map(|p| format!("{p}: {}\n", f(p)))
            .collect::<String>()
    };
    let records = vec![
        record("B0", None, &whole(&|_| "3. Neither".into()), None),
        record("B0r", None, &whole(&|_| "3".into()), None),
        // one position unreadable under both rules: items read, reply not readable
        record(
            "BS1",
            None,
            &whole(&|p| if p == 7 { "3 or 4".into() } else { "2".into() }),
            None,
        ),
        // a failed whole-test request shows 60 items, none read
        record("BS2", None, "1: 3", Some("HTTP 500")),
        record("S0", Some(1), "4", None),
        record("S0", Some(2), "4. Moderately Accurate", None),
        record("S0", Some(3), "6. Very Accurate", None),
        record("S0", Some(4), "x", None),
        record("S0", Some(5), "4", Some("timeout")),
    ];
    let m = score_recorded(&records);
    let row = |c: &str, mode: &str, rule: &str, n: [i32; 4]| -> RuleRow {
        (c.into(), mode.into(), rule.into(), n[0], n[1], n[2], n[3])
    };
    assert_eq!(
        rule_rows(&m.rules, "m"),
        vec![
            row("B0", "whole", "strict", [1, 0, 60, 0]),
            row("B0", "whole", "lenient", [1, 1, 60, 60]),
            row("B0r", "whole", "strict", [1, 1, 60, 60]),
            row("B0r", "whole", "lenient", [1, 1, 60, 60]),
            row("BS1", "whole", "strict", [1, 0, 60, 59]),
            row("BS1", "whole", "lenient", [1, 0, 60, 59]),
            row("BS2", "whole", "strict", [1, 0, 60, 0]),
            row("BS2", "whole", "lenient", [1, 0, 60, 0]),
            row("S0", "single", "strict", [5, 1, 5, 1]),
            row("S0", "single", "lenient", [5, 2, 5, 2]),
        ]
    );
    // The strict rows agree with the parsed answers (the study's rule) item for item.
    let parsed: Vec<ParsedRow> = rows_of(&m.parsed);
    let ok_items = |c: &str| {
        parsed
            .iter()
            .filter(|p| p.condition == c && p.status == Ok)
            .count() as i32
    };
    for (c, _, rule, _, _, _, readable_items) in rule_rows(&m.rules, "m") {
        if rule == "strict" {
            assert_eq!(ok_items(&c), readable_items, "{c}");
        }
    }
}

/// The recorded SmolLM2 replies (`4. Moderately Accurate` and the like): the lenient rule reads
/// what the strict rule reads and more; the strict counts are the parsed answers' `ok` rows.
#[test]
fn recorded_replies_under_both_rules() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let records = protospread_fetch::read_records(
        &root.join("data/recorded/smollm2-135m-instruct.jsonl"),
        &Vocabulary::default(),
    )
    .unwrap();
    let m = score_recorded(&records);
    let parsed: Vec<ParsedRow> = rows_of(&m.parsed);
    let rows = rule_rows(&m.rules, "SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(rows.len(), 2 * 11, "eleven conditions, two rules");
    let (mut strict_total, mut lenient_total) = (0, 0);
    for pair in rows.chunks(2) {
        let (s, l) = (&pair[0], &pair[1]);
        assert_eq!(
            (s.0.as_str(), s.2.as_str(), l.2.as_str()),
            (l.0.as_str(), "strict", "lenient")
        );
        // same requests and items; lenient reads at least what strict reads
        assert_eq!((s.3, s.5), (l.3, l.5), "{s:?} {l:?}");
        assert!(l.4 >= s.4 && l.6 >= s.6, "{s:?} {l:?}");
        let ok = parsed
            .iter()
            .filter(|p| p.condition == s.0 && p.status == Ok)
            .count() as i32;
        assert_eq!(s.6, ok, "{}", s.0);
        strict_total += s.6;
        lenient_total += l.6;
    }
    // The figures data/recorded/README.md (strict: ok 1) and docs/stored-answers.md quote.
    assert_eq!((strict_total, lenient_total), (1, 152));
    let readable =
        |c: &str| -> Vec<i32> { rows.iter().filter(|r| r.0 == c).map(|r| r.4).collect() };
    assert_eq!(readable("S0"), [0, 39]);
    assert_eq!(readable("SP"), [0, 49]);
    assert_eq!(readable("ST1"), [1, 22]);
    assert_eq!(readable("B0"), [0, 0]);
}

mod tallies {
    //! The scale-score plans (each request's readings scored where they are read, summed per
    //! administration) against the plain scorer, `protospread_score::score`, on replies of
    //! every kind, in both modes and option orders.
    use super::*;
    use arrow::array::{Array, BooleanArray, Float64Array};
    use proptest::prelude::*;
    use protospread_format::option_to_value;

    const ITEMS: i32 = 18;

    fn reply() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "1", "2", "3", "4", "5", "1", "2", "3", "4", "5", "3.", "0", "6", "x", "", " 4 ",
        ])
    }

    /// (single replies by item, failed single item, shown order, whole reply lines by
    /// position, whole request failed, options reversed)
    type Case = (
        Vec<&'static str>,
        Option<usize>,
        Vec<i32>,
        Vec<String>,
        bool,
        bool,
    );

    fn case() -> impl Strategy<Value = Case> {
        (
            prop::collection::vec(reply(), ITEMS as usize),
            prop::option::of(0..ITEMS as usize),
            Just((1..=ITEMS).collect::<Vec<i32>>()).prop_shuffle(),
            prop::collection::vec(
                (reply(), 0..10u8).prop_map(|(r, k)| match k {
                    0 => String::new(),       // line left out
                    1 => format!("{r}\n{r}"), // a second line for the position
                    _ => r.to_string(),
                }),
                ITEMS as usize,
            ),
            prop::bool::weighted(0.1),
            any::<bool>(),
        )
    }

    fn value(r: &Reading, order: OptionOrder) -> Option<u8> {
        match (r.status, r.option) {
            (Ok, Some(o)) => option_to_value(o, order).map(|v| v as u8),
            _ => None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn scale_scores_are_the_scorers(c in case()) {
            let (singles, failed_item, shown, lines, whole_failed, reversed) = c;
            let order = if reversed { OptionOrder::Reversed } else { OptionOrder::Human };
            let base = |condition: &str, item: Option<i32>, reply: String, error: bool| StoredRecord {
                test: "dark_triad".into(),
                option_order: order,
                item_order: item.is_none().then(|| shown.clone()),
                ..record(condition, item, &reply, error.then_some("HTTP 500"))
            };
            let mut records: Vec<StoredRecord> = (1..=ITEMS)
                .map(|i| base("S0", Some(i), singles[i as usize - 1].to_string(),
                              failed_item == Some(i as usize - 1)))
                .collect();
            let whole_reply: String = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.is_empty())
                .map(|(p, l)| l.split('\n').map(|x| format!("{}: {x}", p + 1)).collect::<Vec<_>>().join("\n"))
                .collect::<Vec<_>>()
                .join("\n");
            records.push(base("B0", None, whole_reply.clone(), whole_failed));
            let m = score_recorded(&records);

            // The answer vectors as the plain rules read them.
            let mut single = vec![None; ITEMS as usize];
            for (k, reply) in singles.iter().enumerate() {
                if failed_item != Some(k) {
                    single[k] = value(&read_single(reply), order);
                }
            }
            let mut whole = vec![None; ITEMS as usize];
            if !whole_failed {
                for (p, r) in read_whole(&whole_reply, ITEMS as usize).iter().enumerate() {
                    whole[shown[p] as usize - 1] = value(r, order);
                }
            }
            let key = ScoringKey::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/scoring_key.csv")).unwrap();
            let mut rows = 0;
            for b in &m.scales {
                let col = |n: &str| b.column_by_name(n).unwrap().clone();
                let (cond, dim) = (col("condition"), col("dimension"));
                let (cond, dim) = (cond.as_string::<i32>(), dim.as_string::<i32>());
                let score = col("score");
                let score = score.as_any().downcast_ref::<Float64Array>().unwrap();
                let constant = col("constant_answers");
                let constant = constant.as_any().downcast_ref::<BooleanArray>().unwrap();
                for i in 0..b.num_rows() {
                    let answers = if cond.value(i) == "S0" { &single } else { &whole };
                    let expected = protospread_score::score(&key, "dark_triad", answers).unwrap();
                    let d = expected.dims.iter().find(|d| d.dimension == dim.value(i)).unwrap();
                    let got = (!score.is_null(i)).then(|| score.value(i));
                    prop_assert_eq!(got, d.value, "{} {}", cond.value(i), dim.value(i));
                    let options: Vec<u8> = answers.iter().flatten().copied().collect();
                    let same = options.len() >= 2 && options.iter().all(|o| *o == options[0]);
                    prop_assert_eq!(constant.value(i), same, "{}", cond.value(i));
                    rows += 1;
                }
            }
            prop_assert_eq!(rows, 2 * 3);
        }
    }
}

/// Names are values in the score stage's plans, not SQL: a source, a label and a rerun
/// condition holding quotes, a backslash and SQL come out as themselves in every table, and
/// the rerun pair compares exactly the two conditions' replies.
#[test]
fn names_holding_quotes_backslashes_and_sql_are_values() {
    const NAME: &str = "src' OR '1'='1\\";
    const COND: &str = "S0r') OR TRUE; --\\";
    let records = vec![
        record("S0", Some(1), "4", None),
        record("S0", Some(2), "x", None),
        record(COND, Some(1), "4", None),
        record(COND, Some(2), "5", None),
    ];
    let key =
        ScoringKey::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/scoring_key.csv"))
            .unwrap();
    let m = score_in_memory(
        NAME,
        Some(NAME),
        &records,
        &Vocabulary::default(),
        &key,
        &Norms::default(),
        &[["S0".to_string(), COND.to_string()]],
    )
    .unwrap();
    let texts = |batches: &[RecordBatch], column: &str| -> Vec<String> {
        batches
            .iter()
            .flat_map(|b| {
                let c = b.column_by_name(column).unwrap();
                let c = arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).unwrap();
                (0..c.len())
                    .map(|i| c.as_string::<i32>().value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    for (table, batches) in [
        ("parsed", &m.parsed),
        ("scales", &m.scales),
        ("reruns", &m.reruns),
        ("rules", &m.rules),
        ("by_rule", &m.by_rule),
    ] {
        let sources = texts(batches, "source");
        assert!(!sources.is_empty(), "{table}");
        assert!(sources.iter().all(|s| s == NAME), "{table}: {sources:?}");
        let labels = texts(batches, "label");
        assert!(labels.iter().all(|s| s == NAME), "{table}: {labels:?}");
    }
    assert!(texts(&m.rules, "condition").iter().any(|c| c == COND));
    assert_eq!(
        texts(&m.rules, "rule")[..2],
        ["strict".to_string(), "lenient".to_string()]
    );
    let rerun = |c: &str| texts(&m.reruns, c);
    assert_eq!(
        (
            rerun("first"),
            rerun("rerun"),
            rerun("compared"),
            rerun("identical")
        ),
        (
            vec!["S0".to_string()],
            vec![COND.to_string()],
            vec!["2".to_string()],
            vec!["1".to_string()]
        )
    );
}
