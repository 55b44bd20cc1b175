//! Stored answers: the strict reply rule, the option mapping, import errors, and recovery of
//! the planted effects of the committed simulated study (issue 4).

use protospread_fetch::{import_file, read_records};
use protospread_format::{option_to_value, OptionOrder, StoredRecord, Vocabulary};
use protospread_score::{read_single, read_whole, Reading, Status};
use protospread_score::{Norms, ScoringKey};
use protospread_simulate::{ItemInfo, SIMULATED_ANSWERS_FILE, SIMULATED_TRUTH_FILE};
use protospread_testutils::{parse_and_score, ParsedRow, ScaleRow};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_protospread"))
}

use Status::*;

/// (reply, expected status, expected option number as replied)
pub(crate) const TABLE: &[(&str, Status, Option<i32>)] = &[
    ("", NotANumber, None),
    ("   ", NotANumber, None),
    ("\n\t ", NotANumber, None),
    ("3", Ok, Some(3)),
    ("1", Ok, Some(1)),
    ("5", Ok, Some(5)),
    (" 3 ", Ok, Some(3)),
    ("3\n", Ok, Some(3)),
    ("\t4\r\n", Ok, Some(4)),
    ("\u{a0}2\u{a0}", Ok, Some(2)),
    ("3.", Ok, Some(3)),
    ("3)", Ok, Some(3)),
    ("03", Ok, Some(3)),
    ("0", OutOfRange, Some(0)),
    ("6", OutOfRange, Some(6)),
    ("6.", OutOfRange, Some(6)),
    ("12", OutOfRange, Some(12)),
    ("00", OutOfRange, Some(0)),
    ("99999999999999999999", OutOfRange, Some(i32::MAX)),
    ("3 - Moderately Accurate", NotANumber, None),
    ("Answer: 3", NotANumber, None),
    ("3/5", NotANumber, None),
    ("three", NotANumber, None),
    ("Three.", NotANumber, None),
    ("3 or 4", NotANumber, None),
    ("3, 4", NotANumber, None),
    ("3 4", NotANumber, None),
    ("(3)", NotANumber, None),
    ("**3**", NotANumber, None),
    ("`3`", NotANumber, None),
    ("\"3\"", NotANumber, None),
    ("3.0", NotANumber, None),
    ("3..", NotANumber, None),
    ("3.)", NotANumber, None),
    ("-3", NotANumber, None),
    ("+3", NotANumber, None),
    ("3!", NotANumber, None),
    ("#3", NotANumber, None),
    ("Option 3", NotANumber, None),
    ("3 (Neutral)", NotANumber, None),
    ("\u{ff13}", NotANumber, None),             // full-width 3
    ("\u{0663}", NotANumber, None),             // Arabic-Indic 3
    ("\u{0969}", NotANumber, None),             // Devanagari 3
    ("\u{2462}", NotANumber, None),             // circled 3
    ("III", NotANumber, None),
    ("I'm an AI language model and don't have personal feelings, so I can't rate this statement.", NotANumber, None),
    ("I cannot answer that.", NotANumber, None),
    ("Considering the statement carefully, I would say that on most days I feel this way, but there are 2 or 3 exceptions each week, so overall I lean towards agreeing with it moderately.", NotANumber, None),
    ("3\n\nExplanation: I am moderately accurate here.", NotANumber, None),
    ("1: 3", NotANumber, None),
];

#[test]
fn parsing_table() {
    assert!(
        TABLE.len() >= 40,
        "the acceptance asks for at least 40 reply texts"
    );
    for (reply, status, option) in TABLE {
        let got = read_single(reply);
        assert_eq!(
            got,
            Reading {
                option: *option,
                status: *status
            },
            "reply {reply:?}"
        );
    }
}

/// (whole-test reply for a 4-item test, expected (status, option) per shown position)
/// A whole-test reply for a 4-item test and the expected (status, option) per shown position.
type WholeCase<'a> = (&'a str, [(Status, Option<i32>); 4]);

#[test]
fn whole_reply_table() {
    let cases: &[WholeCase] = &[
        (
            "1: 4\n2: 3\n3: 2\n4: 1",
            [(Ok, Some(4)), (Ok, Some(3)), (Ok, Some(2)), (Ok, Some(1))],
        ),
        // items out of order, other separators, prose before and after
        (
            "Here are my answers:\n\n3) 5\n1. 2\n4 - 1\n2= 3\n\nI hope this helps!",
            [(Ok, Some(2)), (Ok, Some(3)), (Ok, Some(5)), (Ok, Some(1))],
        ),
        // a missing item
        (
            "1: 4\n2: 3\n4: 1",
            [
                (Ok, Some(4)),
                (Ok, Some(3)),
                (MissingInWhole, None),
                (Ok, Some(1)),
            ],
        ),
        // a duplicated item (even with the same answer)
        (
            "1: 4\n2: 3\n2: 3\n3: 1\n4: 2",
            [
                (Ok, Some(4)),
                (DuplicateInWhole, None),
                (Ok, Some(1)),
                (Ok, Some(2)),
            ],
        ),
        // words, out of range, trailing dot, positions beyond the test ignored
        (
            "1: Agree\n2: 7\n3: 4.\n4: 2\n5: 5",
            [
                (NotANumber, None),
                (OutOfRange, Some(7)),
                (Ok, Some(4)),
                (Ok, Some(2)),
            ],
        ),
        // lines that are not answer lines: markup, prefixes, no separator
        (
            "**1**: 4\nItem 2: 3\n- 3: 2\n4 1",
            [
                (MissingInWhole, None),
                (MissingInWhole, None),
                (MissingInWhole, None),
                (MissingInWhole, None),
            ],
        ),
        // CRLF line ends and extra prose with numbers in it
        (
            "I rated 4 statements.\r\n1: 1\r\n2: 2\r\n3: 3\r\n4: 4\r\nThat is 4 answers.",
            [(Ok, Some(1)), (Ok, Some(2)), (Ok, Some(3)), (Ok, Some(4))],
        ),
        ("", [(MissingInWhole, None); 4]),
    ];
    for (reply, expect) in cases {
        let got = read_whole(reply, 4);
        let want: Vec<Reading> = expect
            .iter()
            .map(|(s, o)| Reading {
                option: *o,
                status: *s,
            })
            .collect();
        assert_eq!(got, want, "reply {reply:?}");
    }
}

#[test]
fn reversed_options_map_back_for_every_option() {
    for k in 1..=5 {
        assert_eq!(option_to_value(k, OptionOrder::Human), Some(k - 1));
        assert_eq!(option_to_value(k, OptionOrder::Reversed), Some(5 - k));
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs_err::write(&p, text).unwrap();
    p
}

const HEADER: &str = "format_version,study,model,arm,cohort,condition,sample,test,mode,item,item_order,order_seed,option_order,instruction,temperature,reply,error,label";

fn csv_row(condition: &str, model: &str, sample: &str, item: u32, reply: &str) -> String {
    format!("1,st,{model},api,full,{condition},{sample},dark_triad,single,{item},,,human,P1,0,{reply},,t")
}

#[test]
fn bad_rows_are_rejected_with_file_row_column() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (csv_row("S9", "m", "1", 2, "3"), "column condition", "S9"),
        (csv_row("S0", "", "1", 2, "3"), "column model", "missing"),
        (csv_row("S0", "m", "x", 2, "3"), "column sample", "\"x\""),
        (csv_row("S0", "m", "1.5", 2, "3"), "column sample", "1.5"),
        (csv_row("S0", "m", "1", 19, "3"), "column item", "19"),
    ];
    for (i, (bad, col, what)) in cases.iter().enumerate() {
        let text = format!("{HEADER}\n{}\n{bad}\n", csv_row("S0", "m", "1", 1, "3"));
        let p = write(dir.path(), &format!("bad{i}.csv"), &text);
        let e = import_file(&p).unwrap_err().to_string();
        assert!(e.contains(&format!("bad{i}.csv")), "{e}");
        assert!(e.contains("row 2 (line 3)"), "{e}");
        assert!(e.contains(col), "{e}");
        assert!(e.contains(what), "{e}");
    }
    // JSONL: sample given as a word; an unknown key; a missing required key.
    let good = r#"{"format_version":1,"study":"st","model":"m","arm":"api","condition":"S0","sample":1,"test":"dark_triad","mode":"single","item":1,"option_order":"human","instruction":"P1","reply":"3"}"#;
    for (bad, col) in [
        (
            good.replace("\"sample\":1", "\"sample\":\"one\""),
            "column sample",
        ),
        (
            good.replace("\"sample\":1", "\"sampel\":1"),
            "column sampel",
        ),
        (good.replace(",\"reply\":\"3\"", ""), "column reply"),
        (good.replace("\"S0\"", "\"X1\""), "column condition"),
        (good.replace("\"model\":\"m\",", ""), "column model"),
    ] {
        let p = write(dir.path(), "bad.jsonl", &format!("{good}\n{bad}\n"));
        let e = import_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("bad.jsonl: row 2 (line 2), ") && e.contains(col),
            "{e}"
        );
    }
    // A duplicated request names the first row.
    let r = csv_row("S0", "m", "1", 1, "3");
    let p = write(dir.path(), "dup.csv", &format!("{HEADER}\n{r}\n{r}\n"));
    let e = import_file(&p).unwrap_err().to_string();
    assert!(e.contains("row 2") && e.contains("as row 1"), "{e}");
    // Unknown extension.
    let p = write(dir.path(), "x.txt", "");
    assert!(import_file(&p).unwrap_err().to_string().contains(".txt"));
}

#[test]
fn declared_conditions_and_tests_are_accepted() {
    use protospread_core::{AnswersExtraTest, AnswersSection};
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{HEADER}\n1,st,m,local,,S0sys,0,mini,single,2,,,reversed,P3,0.7,4,,\n");
    let p = write(dir.path(), "a.csv", &text);
    assert!(import_file(&p).is_err());
    let sec = AnswersSection {
        extra_conditions: vec!["S0sys".into()],
        extra_tests: vec![AnswersExtraTest {
            name: "mini".into(),
            items: 2,
        }],
        extra_instructions: vec!["P3".into()],
    };
    let recs = read_records(&p, &Vocabulary::from_section(&sec)).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].temperature, Some(0.7));
    assert_eq!(recs[0].cohort, None);
}

#[test]
fn csv_jsonl_and_parquet_import_identically() {
    let dir = tempfile::tempdir().unwrap();
    let csv_text = format!(
        "{HEADER}\n\
         1,st,m,api,pilot,B0,1,dark_triad,whole,,{order},,human,P1,0,\"Answers:\n1: 3\n2: 4\",,\n\
         1,st,m,api,pilot,S0,1,dark_triad,single,2,,,human,P1,0,3,,\n\
         1,st,m,api,pilot,S0,1,dark_triad,single,1,,,human,P1,0,,HTTP 500,\n",
        order = (1..=18)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(";")
    );
    let c = write(dir.path(), "a.csv", &csv_text);
    let from_csv = read_records(&c, &Vocabulary::default()).unwrap();
    assert_eq!(from_csv.len(), 3);
    assert_eq!(from_csv[0].condition, "B0"); // sorted by (model, condition, ...)
    assert_eq!(from_csv[1].item, Some(1));
    assert_eq!(from_csv[1].error.as_deref(), Some("HTTP 500"));
    // JSONL with the same content.
    let mut jl = String::new();
    for r in &from_csv {
        let mut o = serde_json::Map::new();
        o.insert("format_version".into(), 1.into());
        o.insert("study".into(), r.study.clone().into());
        o.insert("model".into(), r.model.clone().into());
        o.insert("arm".into(), "api".into());
        o.insert("cohort".into(), "pilot".into());
        o.insert("condition".into(), r.condition.clone().into());
        o.insert("sample".into(), r.sample.into());
        o.insert("test".into(), r.test.clone().into());
        o.insert("mode".into(), r.mode.as_str().into());
        if let Some(i) = r.item {
            o.insert("item".into(), i.into());
        }
        if let Some(t) = r.item_order_text() {
            o.insert("item_order".into(), t.into());
        }
        o.insert("option_order".into(), "human".into());
        o.insert("instruction".into(), "P1".into());
        o.insert("temperature".into(), 0.into());
        o.insert("reply".into(), r.reply.clone().into());
        o.insert("error".into(), r.error.clone().into());
        o.insert("x_latency_ms".into(), 12.into());
        jl.push_str(&serde_json::Value::Object(o).to_string());
        jl.push('\n');
    }
    let j = write(dir.path(), "a.jsonl", &jl);
    assert_eq!(read_records(&j, &Vocabulary::default()).unwrap(), from_csv);
    // Parquet as the fetch stage writes it.
    let (schema, batches) = import_file(&c).unwrap();
    let p = dir.path().join("a.parquet");
    protospread_core::write_parquet(&p, schema, &batches, &protospread_core::FileMeta::default())
        .unwrap();
    assert_eq!(read_records(&p, &Vocabulary::default()).unwrap(), from_csv);
}

/// `models` models of 18 single-item dark_triad records each, in key order: more rows than one
/// import batch (8192), so that the sorted-file checks meet a batch boundary.
fn sorted_rows(models: usize) -> Vec<String> {
    let mut rows = Vec::new();
    for m in 0..models {
        for item in 1..=18 {
            rows.push(format!(
                "1,st,m{m:04},api,full,S0,1,dark_triad,single,{item},,,human,P1,0,3,,t"
            ));
        }
    }
    rows
}

/// `b` with the columns `cols`: each field keeps its name and takes its column's type, and is
/// nullable when it was or when `all_nullable`.
fn with_columns(
    b: &arrow::array::RecordBatch,
    cols: Vec<arrow::array::ArrayRef>,
    all_nullable: bool,
) -> arrow::array::RecordBatch {
    let fields: Vec<arrow::datatypes::Field> = b
        .schema()
        .fields()
        .iter()
        .zip(&cols)
        .map(|(f, c)| {
            arrow::datatypes::Field::new(
                f.name(),
                c.data_type().clone(),
                all_nullable || f.is_nullable(),
            )
        })
        .collect();
    arrow::array::RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
        cols,
    )
    .unwrap()
}

fn csv_of(rows: &[String]) -> String {
    format!("{HEADER}\n{}\n", rows.join("\n"))
}

#[test]
fn sorted_files_skip_the_sort_and_break_rules_with_the_same_errors() {
    let dir = tempfile::tempdir().unwrap();
    let rows = sorted_rows(600);
    let sorted = write(dir.path(), "sorted.csv", &csv_of(&rows));
    let mut reversed_rows = rows.clone();
    reversed_rows.reverse();
    let reversed = write(dir.path(), "reversed.csv", &csv_of(&reversed_rows));
    let a = read_records(&sorted, &Vocabulary::default()).unwrap();
    assert_eq!(a.len(), 600 * 18);
    assert_eq!(a, read_records(&reversed, &Vocabulary::default()).unwrap());
    assert!(a.windows(2).all(|w| w[0].sort_key() < w[1].sort_key()));

    // Each rule broken once in a file that is otherwise in order, in the second batch or at
    // the boundary (rows are numbered from 1: row 8192 ends the first batch).
    let err = |rows: &[String], name: &str| {
        let p = write(dir.path(), name, &csv_of(rows));
        import_file(&p).unwrap_err().to_string()
    };
    // Row 9001 is item 1 of model 500 (rows 9001..9018): its item 2 with another arm.
    let mut arm = rows.clone();
    arm[9001] = arm[9001].replace(",api,", ",cli,");
    let e = err(&arm, "arm.csv");
    assert!(
        e.contains("row 9002 (line 9003), column arm")
            && e.contains("model m0500 has arm cli here but api in row 9001"),
        "{e}"
    );
    // The same administration at another temperature.
    let mut temp = rows.clone();
    temp[9005] = temp[9005].replace(",P1,0,", ",P1,0.5,");
    let e = err(&temp, "temp.csv");
    assert!(
        e.contains("row 9006 (line 9007), column temperature")
            && e.contains("differs from row 9001 of the same administration"),
        "{e}"
    );
    // A repeated request across the batch boundary: row 8193 repeats row 8192.
    let mut dup = rows.clone();
    dup[8192] = dup[8191].clone();
    let e = err(&dup, "dup.csv");
    assert!(
        e.contains("row 8193 (line 8194), column item")
            && e.contains(
                "duplicate request: same model, condition, sample, test and item as row 8192"
            ),
        "{e}"
    );
    // Two records out of order are sorted, not refused.
    let mut swapped = rows;
    swapped.swap(100, 9000);
    let p = write(dir.path(), "swapped.csv", &csv_of(&swapped));
    assert_eq!(read_records(&p, &Vocabulary::default()).unwrap(), a);

    // The same in Parquet, whose batches the column checks accept whole: in order, out of
    // order after a first batch already handed on (the import starts over), and a rule
    // broken in the second batch.
    let parquet = |recs: &[protospread_format::StoredRecord], name: &str| {
        let p = dir.path().join(name);
        let b = protospread_format::to_batch(recs).unwrap();
        protospread_core::write_parquet(
            &p,
            b.schema(),
            &[b],
            &protospread_core::FileMeta::default(),
        )
        .unwrap();
        p
    };
    let p = parquet(&a, "sorted.parquet");
    assert_eq!(read_records(&p, &Vocabulary::default()).unwrap(), a);
    let mut swapped = a.clone();
    swapped.swap(100, 9000);
    let p = parquet(&swapped, "swapped.parquet");
    assert_eq!(read_records(&p, &Vocabulary::default()).unwrap(), a);
    // Texts stored as dictionaries and whole numbers as 64-bit integers, as other writers store
    // them: read as the same records.
    let b = protospread_format::to_batch(&a).unwrap();
    let cols: Vec<arrow::array::ArrayRef> = b
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            arrow::datatypes::DataType::Utf8 => arrow::compute::cast(
                c,
                &arrow::datatypes::DataType::Dictionary(
                    Box::new(arrow::datatypes::DataType::Int32),
                    Box::new(arrow::datatypes::DataType::Utf8),
                ),
            )
            .unwrap(),
            arrow::datatypes::DataType::Int32 => {
                arrow::compute::cast(c, &arrow::datatypes::DataType::Int64).unwrap()
            }
            _ => c.clone(),
        })
        .collect();
    let typed = with_columns(&b, cols, true);
    let p = dir.path().join("typed.parquet");
    protospread_core::write_parquet(
        &p,
        typed.schema(),
        &[typed],
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    assert_eq!(read_records(&p, &Vocabulary::default()).unwrap(), a);
    let mut arm = a;
    arm[9001].arm = protospread_format::Arm::Cli;
    let e = import_file(&parquet(&arm, "arm.parquet"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("row 9002, column arm")
            && e.contains("model m0500 has arm cli here but api in row 9001"),
        "{e}"
    );
}

/// A stored-answer Parquet file already in the fetch stage's output form (the stored schema,
/// valid and normalized records, in order) is recognised, and its column chunks are copied
/// under our footer: the same table as importing it, in the input's row groups. Anything
/// else is left to the import: a record out of order (also where the file's row groups are
/// split between the threads that check them), a value the import normalizes, an invalid
/// record (the import names it), another column type, a CSV file.
#[test]
fn files_already_in_the_output_form_are_recognised_and_copied() {
    use protospread_fetch::already_imported;
    use protospread_format::{to_batch, StoredRecord};
    let dir = tempfile::tempdir().unwrap();
    let vocab = Vocabulary::default();
    let csv = write(dir.path(), "sorted.csv", &csv_of(&sorted_rows(600)));
    let a = read_records(&csv, &vocab).unwrap();
    // Row groups of 1,000 records, unlike the fetch stage's own writer: 11 of them.
    let parquet = |recs: &[StoredRecord], name: &str| {
        let p = dir.path().join(name);
        let b = to_batch(recs).unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .build();
        let f = fs_err::File::create(&p).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(f, b.schema(), Some(props)).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        p
    };
    let table = |p: &Path| {
        let (schema, batches) = protospread_core::read_parquet(p).unwrap();
        arrow::compute::concat_batches(&schema, &batches).unwrap()
    };
    let good = parquet(&a, "good.parquet");
    assert_eq!(already_imported(&good, &vocab), Some(a.len()));
    assert_eq!(already_imported(&csv, &vocab), None);
    let copied = dir.path().join("copied.parquet");
    let bytes = protospread_core::copy_parquet_chunks(
        &good,
        fs_err::read(&good).unwrap(),
        protospread_core::STORED_ANSWERS.schema(),
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    fs_err::write(&copied, &bytes).unwrap();
    assert_eq!(table(&copied), table(&good));
    let meta = |p: &Path| {
        let f = fs_err::File::open(p).unwrap().into_parts().0;
        use parquet::file::reader::FileReader;
        parquet::file::serialized_reader::SerializedFileReader::new(f)
            .unwrap()
            .metadata()
            .clone()
    };
    let (m_in, m_out) = (meta(&good), meta(&copied));
    assert_eq!(m_out.num_row_groups(), 11);
    for (g_in, g_out) in m_in.row_groups().iter().zip(m_out.row_groups()) {
        for (c_in, c_out) in g_in.columns().iter().zip(g_out.columns()) {
            assert_eq!(c_in.compressed_size(), c_out.compressed_size());
            assert_eq!(c_in.encodings_mask(), c_out.encodings_mask());
        }
    }
    let created_by = m_out.file_metadata().created_by().unwrap().to_string();
    assert!(created_by.starts_with("protospread"), "{created_by}");
    // The same input, copied twice: the same bytes.
    assert_eq!(
        protospread_core::copy_parquet_chunks(
            &good,
            fs_err::read(&good).unwrap(),
            protospread_core::STORED_ANSWERS.schema(),
            &protospread_core::FileMeta::default()
        )
        .unwrap(),
        bytes
    );

    // Two records swapped within a row group, and at the boundary of the two halves of the
    // row groups (records 6,000 and 6,001: row groups 0..5 and 6..10 on two threads).
    for (i, j) in [(10, 11), (5999, 6000)] {
        let mut swapped = a.clone();
        swapped.swap(i, j);
        let p = parquet(&swapped, &format!("swapped{i}.parquet"));
        assert_eq!(already_imported(&p, &vocab), None, "swap {i} {j}");
    }
    // A request repeated across that boundary.
    let mut dup = a.clone();
    dup[6000] = dup[5999].clone();
    assert_eq!(
        already_imported(&parquet(&dup, "dup.parquet"), &vocab),
        None
    );
    // An empty cohort (all of one model's records) is imported as none: not the file's own
    // table.
    let b = to_batch(&a).unwrap();
    let with_empty = |col: &str, rows: std::ops::Range<usize>| {
        let i = b.schema().index_of(col).unwrap();
        let mut cols = b.columns().to_vec();
        let mut v: Vec<Option<String>> = cols[i]
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .unwrap()
            .iter()
            .map(|x| x.map(str::to_string))
            .collect();
        for r in rows {
            v[r] = Some(String::new());
        }
        cols[i] = std::sync::Arc::new(arrow::array::StringArray::from(v));
        arrow::array::RecordBatch::try_new(b.schema(), cols).unwrap()
    };
    let p = dir.path().join("empty_cohort.parquet");
    protospread_core::write_parquet(
        &p,
        b.schema(),
        &[with_empty("cohort", 388 * 18..389 * 18)],
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    assert_eq!(already_imported(&p, &vocab), None);
    assert_eq!(read_records(&p, &vocab).unwrap()[7000].cohort, None);
    // An invalid record: left to the import, which names it.
    let mut arm = a;
    arm[9001].arm = protospread_format::Arm::Cli;
    let p = parquet(&arm, "arm.parquet");
    assert_eq!(already_imported(&p, &vocab), None);
    let e = import_file(&p).unwrap_err().to_string();
    assert!(e.contains("row 9002, column arm"), "{e}");
    // Samples as 64-bit integers: valid, but not the stored schema's column type.
    let i = b.schema().index_of("sample").unwrap();
    let mut cols = b.columns().to_vec();
    cols[i] = arrow::compute::cast(&cols[i], &arrow::datatypes::DataType::Int64).unwrap();
    let wide = with_columns(&b, cols, false);
    let p = dir.path().join("wide.parquet");
    protospread_core::write_parquet(
        &p,
        wide.schema(),
        &[wide],
        &protospread_core::FileMeta::default(),
    )
    .unwrap();
    assert_eq!(already_imported(&p, &vocab), None);
    assert!(protospread_core::copy_parquet_chunks(
        &p,
        fs_err::read(&p).unwrap(),
        protospread_core::STORED_ANSWERS.schema(),
        &protospread_core::FileMeta::default()
    )
    .is_err());

    // Through `protospread fetch`: the copied file and the imported CSV are the same table.
    let fetched = |input: &Path| {
        let name = input.file_name().unwrap().to_string_lossy().to_string();
        let cfg = dir.path().join(format!("{name}.toml"));
        fs_err::write(&cfg, answers_config(&name, &sha256(input))).unwrap();
        let out = dir.path().join(format!("out-{name}"));
        let o = fetch_with(&cfg, &out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out.join("fetch/answers/mine.parquet")
    };
    let from_parquet = fetched(&good);
    let from_csv = fetched(&csv);
    // (Their provenance metadata names different inputs.)
    let (x, y) = (table(&from_parquet), table(&from_csv));
    assert_eq!(x.schema().fields(), y.schema().fields());
    assert_eq!(x.columns(), y.columns());
    assert_eq!(meta(&from_parquet).num_row_groups(), 11);
    assert_eq!(meta(&from_csv).num_row_groups(), 1);
}

// ---- the committed simulated study -------------------------------------------------------

const SEED: u64 = 20250401;

fn sim_dir() -> PathBuf {
    root().join("data/simulated")
}

fn key() -> ScoringKey {
    ScoringKey::load(&root().join("data/scoring_key.csv")).unwrap()
}

pub(crate) struct Sim {
    records: Vec<StoredRecord>,
    parsed: Vec<ParsedRow>,
    scales: Vec<ScaleRow>,
    pub(crate) truth: serde_json::Value,
    items: Vec<ItemInfo>,
}

/// The integer scale scores of one model's cells as the aggregate stage tests them: per
/// (test, dimension), the scores of the ten protocol conditions (sample 1) and of the ST1
/// samples, each of a complete scale, in condition and sample order. (The stage also needs a z
/// score, which every complete scale has with the human norms; the norms here are empty.)
pub(crate) fn cell_scores(s: &Sim, model: &str) -> BTreeMap<(String, String), CellScores> {
    const PROTOCOL: [&str; 10] = [
        "S0", "S0r", "SR", "SP", "B0", "B0r", "BS1", "BS2", "BS3", "BS4",
    ];
    let mut out: BTreeMap<(String, String), CellScores> = BTreeMap::new();
    let mut rows: Vec<&ScaleRow> = s
        .scales
        .iter()
        .filter(|r| r.model == model && r.complete)
        .collect();
    rows.sort_by_key(|r| {
        let c = PROTOCOL.iter().position(|c| *c == r.condition);
        (c.unwrap_or(PROTOCOL.len()), r.sample)
    });
    for r in rows {
        let v = r.score.expect("a complete scale has a score");
        assert!(v.fract() == 0.0, "scale scores are integers: {v}");
        let cell = out
            .entry((r.test.clone(), r.dimension.clone()))
            .or_default();
        if r.condition == "ST1" {
            cell.sampling.push(v as i64);
        } else if PROTOCOL.contains(&r.condition.as_str()) {
            cell.protocol.push(v as i64);
        }
    }
    out
}

/// A cell's protocol scores (one per protocol condition) and sampling scores (one per ST1
/// sample).
#[derive(Debug, Default)]
pub(crate) struct CellScores {
    pub(crate) protocol: Vec<i64>,
    pub(crate) sampling: Vec<i64>,
}

fn load_sim() -> Sim {
    load_sim_from(&sim_dir())
}

/// A simulated study as `simulate` writes it in `dir`, parsed and scored.
pub(crate) fn load_sim_from(dir: &Path) -> Sim {
    let key = key();
    let records = read_records(&dir.join(SIMULATED_ANSWERS_FILE), &Vocabulary::default()).unwrap();
    let (parsed, scales, _) = parse_and_score(
        "simulated",
        Some("simulated"),
        &records,
        &Vocabulary::default(),
        &key,
        &Norms::default(),
    )
    .unwrap();
    let truth: serde_json::Value =
        serde_json::from_slice(&fs_err::read(dir.join(SIMULATED_TRUTH_FILE)).unwrap()).unwrap();
    Sim {
        records,
        parsed,
        scales,
        truth,
        items: protospread_simulate::item_map(&key).unwrap(),
    }
}

#[test]
fn simulate_is_deterministic_and_matches_the_committed_study() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["a", "b"] {
        let st = bin()
            .args([
                "--quiet",
                "--config",
                root().join("pipeline.toml").to_str().unwrap(),
            ])
            .args(["simulate", "--seed", &SEED.to_string(), "--dir"])
            .arg(dir.path().join(sub))
            .status()
            .unwrap();
        assert!(st.success());
    }
    for f in [SIMULATED_ANSWERS_FILE, SIMULATED_TRUTH_FILE] {
        let a = fs_err::read(dir.path().join("a").join(f)).unwrap();
        let b = fs_err::read(dir.path().join("b").join(f)).unwrap();
        assert!(a == b, "{f} differs between two runs with the same seed");
        let committed = fs_err::read(sim_dir().join(f)).unwrap();
        assert!(
            a == committed,
            "data/simulated/{f} is not what `simulate --seed {SEED}` writes"
        );
    }
    // Another seed gives another study.
    let st = bin()
        .args([
            "--quiet",
            "--config",
            root().join("pipeline.toml").to_str().unwrap(),
        ])
        .args(["simulate", "--seed", "7", "--dir"])
        .arg(dir.path().join("c"))
        .status()
        .unwrap();
    assert!(st.success());
    assert_ne!(
        fs_err::read(dir.path().join("c").join(SIMULATED_ANSWERS_FILE)).unwrap(),
        fs_err::read(dir.path().join("a").join(SIMULATED_ANSWERS_FILE)).unwrap()
    );
}

#[test]
fn simulated_study_has_the_published_design_and_is_labelled() {
    let s = load_sim();
    let mut per_model: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &s.records {
        *per_model.entry(&r.model).or_default() += 1;
        assert_eq!(r.label.as_deref(), Some("simulated"));
        assert!(r.study.contains("simulated") && r.model.contains("simulated"));
    }
    assert_eq!(per_model.len(), 16);
    let api: Vec<_> = per_model.keys().filter(|m| m.contains("-api-")).collect();
    assert_eq!(api.len(), 13);
    for (m, n) in &per_model {
        let expect = match *m {
            "simulated-api-05" => 1200 - 18 * 7 - 6, // skips the Dark Triad
            "simulated-api-03" => 1200 + 168 * 7,    // ST1 sampled 10 times, not 3
            m if m.contains("-api-") => 1200,
            _ => 168 * 4 + 24, // cli: the ten temperature-0 conditions only
        };
        assert_eq!(*n, expect, "{m}");
    }
    // ST1 samples per model, from the records and as the truth file states them.
    let mut st1: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    for r in s.records.iter().filter(|r| r.condition == "ST1") {
        st1.entry(&r.model).or_default().insert(r.sample);
    }
    for m in s.truth["models"].as_array().unwrap() {
        let name = m["model"].as_str().unwrap();
        let n = m["st1_samples"].as_i64().unwrap() as i32;
        let well = m["well_sampled"].as_bool().unwrap();
        assert_eq!(well, name == "simulated-api-03", "{name}");
        let want = match (m["arm"].as_str().unwrap(), well) {
            ("cli", _) => 0,
            (_, true) => 10,
            _ => 3,
        };
        assert_eq!(n, want, "{name}");
        let got = st1.get(name).cloned().unwrap_or_default();
        assert_eq!(got, (1..=n).collect::<BTreeSet<_>>(), "{name}");
    }
    let cohorts: BTreeSet<_> = s
        .records
        .iter()
        .filter(|r| r.arm.as_str() == "api")
        .map(|r| (r.cohort.clone().unwrap(), r.model.clone()))
        .collect();
    assert_eq!(cohorts.iter().filter(|(c, _)| c == "pilot").count(), 3);
    assert_eq!(cohorts.iter().filter(|(c, _)| c == "full").count(), 10);
    let conds: BTreeSet<_> = s.records.iter().map(|r| r.condition.as_str()).collect();
    assert_eq!(conds.len(), 11);
    assert!(!s
        .records
        .iter()
        .any(|r| r.model == "simulated-api-05" && r.test == "dark_triad"));
}

#[test]
fn planted_unreadable_replies_are_counted_exactly() {
    let s = load_sim();
    let got: BTreeSet<(String, String, i64, String, i64, String)> = s
        .parsed
        .iter()
        .filter(|p| p.status != Ok)
        .map(|p| {
            (
                p.model.clone(),
                p.condition.clone(),
                p.sample as i64,
                p.test.clone(),
                p.item as i64,
                p.status.as_str().to_string(),
            )
        })
        .collect();
    let want: BTreeSet<(String, String, i64, String, i64, String)> = s.truth["planted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["model"].as_str().unwrap().to_string(),
                p["condition"].as_str().unwrap().to_string(),
                p["sample"].as_i64().unwrap(),
                p["test"].as_str().unwrap().to_string(),
                p["item"].as_i64().unwrap(),
                p["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got, want);
    // The paraphrase breaker: 67 of its 168 single-item SP requests, as in the study.
    let sp = s
        .parsed
        .iter()
        .filter(|p| p.model == "simulated-api-07" && p.condition == "SP" && p.status == NotANumber)
        .count();
    assert_eq!(sp, 67);
    let sp_total = s
        .parsed
        .iter()
        .filter(|p| p.model == "simulated-api-07" && p.condition == "SP")
        .count();
    assert_eq!(sp_total, 168);
    // Every status of the rule occurs at least once in the simulated study.
    for st in Status::ALL {
        assert!(
            s.parsed.iter().any(|p| p.status == st),
            "{st:?} never occurs"
        );
    }
}

#[test]
fn constant_answer_model_is_flagged_and_only_it() {
    let s = load_sim();
    let mut flagged: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in &s.scales {
        let e = flagged.entry(&r.model).or_default();
        e.1 += 1;
        if r.constant_answers {
            e.0 += 1;
        }
    }
    for (m, (c, n)) in flagged {
        if m == "simulated-api-12" {
            assert_eq!(
                c, n,
                "every administration of the constant model is flagged"
            );
        } else {
            assert_eq!(c, 0, "{m} is flagged constant");
        }
    }
}

fn keyed(items: &[ItemInfo], test: &str, item: i32, value: i32) -> f64 {
    let info = items
        .iter()
        .find(|x| x.test == test && x.item == item)
        .unwrap();
    if info.reverse {
        (4 - value) as f64
    } else {
        value as f64
    }
}

/// The planted shift of a condition (relative to S0) of each model x scale is recovered from
/// the parsed answers. Measured: the mean keyed item value of the scale under the condition
/// minus under S0, over the items answered in both (a scale with fewer than two such items is
/// skipped: only the paraphrase breaker's SP cells). Expected, computed here from the truth
/// file alone: the same difference of the unrounded latent values (item level + planted
/// shift, the option-order bias -bias in human order and +bias in reversed order on the raw
/// scale, clamped to 0..4). Only the rounding of each answer to an option separates the two:
/// per cell within 4.5 x sqrt(1/6) / sqrt(n) item points for a scale of n items (0.82 for 5
/// items, 0.58 for 10), mean absolute error below 0.15, correlation above 0.95.
/// The planted shift itself (ignoring clamping and bias) correlates above 0.9 with the
/// measured one.
#[test]
fn planted_condition_shifts_are_recovered() {
    let rec = recovery(&load_sim());
    eprintln!(
        "recovery: {} cells x conditions, MAE {:.4}, r {:.4}, r(planted) {:.4}, \
         r(planted, SR included) {:.4}, worst {:.2} of its tolerance: {}",
        rec.pairs, rec.mae, rec.r, rec.r_planted, rec.r_planted_with_sr, rec.worst.0, rec.worst.1
    );
    assert!(rec.pairs >= 2000);
    assert!(rec.worst.0 <= 1.0, "worst cell: {}", rec.worst.1);
    assert!(rec.mae < 0.15, "mean absolute error {}", rec.mae);
    assert!(rec.r > 0.95, "correlation {}", rec.r);
    assert!(
        rec.r_planted > 0.9,
        "correlation with the planted shifts {}",
        rec.r_planted
    );
}

/// How well one simulated study's planted condition shifts are recovered (see
/// `planted_condition_shifts_are_recovered`).
pub(crate) struct Recovery {
    /// Cell x condition pairs compared (SR included).
    pub(crate) pairs: usize,
    /// Mean absolute error of measured against expected shifts.
    pub(crate) mae: f64,
    /// Correlation of measured and expected shifts.
    pub(crate) r: f64,
    /// Correlation of measured and planted shifts over SP, B0, BS1..BS4 (SR left out).
    pub(crate) r_planted: f64,
    /// The same over every condition, SR included.
    pub(crate) r_planted_with_sr: f64,
    /// The worst cell's error in units of its tolerance, and the cell.
    pub(crate) worst: (f64, String),
}

pub(crate) fn recovery(s: &Sim) -> Recovery {
    // (model, condition, test, item) -> value
    let mut v: BTreeMap<(&str, &str, &str, i32), i32> = BTreeMap::new();
    for p in &s.parsed {
        if p.sample == 1 {
            if let Some(x) = p.value {
                v.insert((&p.model, &p.condition, &p.test, p.item), x);
            }
        }
    }
    let bias: BTreeMap<&str, f64> = s.truth["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap(),
                m["option_bias"].as_f64().unwrap(),
            )
        })
        .collect();
    let level: BTreeMap<(&str, &str, i64), f64> = s.truth["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                (
                    x["model"].as_str().unwrap(),
                    x["test"].as_str().unwrap(),
                    x["item"].as_i64().unwrap(),
                ),
                x["level"].as_f64().unwrap(),
            )
        })
        .collect();
    // Expected keyed value of an item from the latent model, unrounded.
    let latent = |model: &str, it: &ItemInfo, shift: f64, reversed_options: bool| -> f64 {
        let x = level[&(model, it.test.as_str(), it.item as i64)] + shift;
        let raw = if it.reverse { 4.0 - x } else { x };
        let b = if reversed_options {
            bias[model]
        } else {
            -bias[model]
        };
        let val = (raw + b).clamp(0.0, 4.0);
        if it.reverse {
            4.0 - val
        } else {
            val
        }
    };
    let (mut exp_pairs, mut planted_pairs, mut all_planted) = (Vec::new(), Vec::new(), Vec::new());
    let mut worst = (0.0f64, String::new());
    for sc in s.truth["scales"].as_array().unwrap() {
        let model = sc["model"].as_str().unwrap();
        if model == "simulated-api-12" {
            continue; // the constant model has no condition effects to recover
        }
        let (test, dim) = (
            sc["test"].as_str().unwrap(),
            sc["dimension"].as_str().unwrap(),
        );
        let items: Vec<&ItemInfo> = s
            .items
            .iter()
            .filter(|x| x.test == test && x.dimension == dim)
            .collect();
        for cond in ["SR", "SP", "B0", "BS1", "BS2", "BS3", "BS4"] {
            let planted = sc["shift"][cond].as_f64().unwrap();
            let (mut diff, mut expected, mut n) = (0.0, 0.0, 0);
            for it in &items {
                let (Some(a), Some(b)) = (
                    v.get(&(model, cond, test, it.item)),
                    v.get(&(model, "S0", test, it.item)),
                ) else {
                    continue;
                };
                diff += keyed(&s.items, test, it.item, *a) - keyed(&s.items, test, it.item, *b);
                expected +=
                    latent(model, it, planted, cond == "SR") - latent(model, it, 0.0, false);
                n += 1;
            }
            if n < 2 {
                // Only the paraphrase breaker's SP replies leave a scale this empty.
                assert_eq!((model, cond), ("simulated-api-07", "SP"), "{test} {dim}");
                continue;
            }
            let (measured, expected) = (diff / n as f64, expected / n as f64);
            // Rounding one answer moves the difference by a roughly uniform error of SD
            // sqrt(1/6); the mean over n items has SD sqrt(1/6)/sqrt(n). Tolerance 4.5 of those.
            let tol = 4.5 * (1.0f64 / 6.0).sqrt() / (n as f64).sqrt();
            let err = (measured - expected).abs() / tol;
            if err > worst.0 {
                worst = (
                    err,
                    format!("{model} {test} {dim} {cond} ({n} items, tolerance {tol:.3}): planted {planted:.3}, expected {expected:.3}, measured {measured:.3}"),
                );
            }
            exp_pairs.push((expected, measured));
            all_planted.push((planted, measured));
            if cond != "SR" {
                planted_pairs.push((planted, measured));
            }
        }
    }
    let mae = exp_pairs.iter().map(|(p, m)| (p - m).abs()).sum::<f64>() / exp_pairs.len() as f64;
    Recovery {
        pairs: exp_pairs.len(),
        mae,
        r: corr(&exp_pairs),
        r_planted: corr(&planted_pairs),
        r_planted_with_sr: corr(&all_planted),
        worst,
    }
}

fn corr(pairs: &[(f64, f64)]) -> f64 {
    let n = pairs.len() as f64;
    let (mp, mm) = (
        pairs.iter().map(|p| p.0).sum::<f64>() / n,
        pairs.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let cov: f64 = pairs.iter().map(|(p, m)| (p - mp) * (m - mm)).sum();
    let vp: f64 = pairs.iter().map(|(p, _)| (p - mp).powi(2)).sum();
    let vm: f64 = pairs.iter().map(|(_, m)| (m - mm).powi(2)).sum();
    cov / (vp * vm).sqrt()
}

/// Sample SD of a slice (divisor n - 1).
fn sd(x: &[f64]) -> f64 {
    let m = x.iter().sum::<f64>() / x.len() as f64;
    (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

/// Temperature-1 noise is planted smaller than the protocol effects: in most complete api
/// cells the SD of the scale score over the ten temperature-0 conditions exceeds the SD over
/// the three ST1 samples; S0 and S0r agree exactly except for the one jittery endpoint.
#[test]
fn sampling_noise_is_smaller_than_protocol_spread() {
    let s = load_sim();
    type Cell<'a> = (&'a str, &'a str, &'a str);
    let mut cell: BTreeMap<Cell, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut s0: BTreeMap<Cell, (Option<f64>, Option<f64>)> = BTreeMap::new();
    for r in &s.scales {
        if r.arm != "api" || r.model == "simulated-api-12" {
            continue;
        }
        let k = (r.model.as_str(), r.test.as_str(), r.dimension.as_str());
        if let Some(x) = r.score {
            let e = cell.entry(k).or_default();
            if r.condition == "ST1" {
                e.1.push(x);
            } else {
                e.0.push(x);
            }
        }
        match r.condition.as_str() {
            "S0" => s0.entry(k).or_default().0 = r.score,
            "S0r" => s0.entry(k).or_default().1 = r.score,
            _ => {}
        }
    }
    let (mut above, mut total) = (0, 0);
    for (p, st) in cell.values() {
        // Three ST1 samples, ten for the well-sampled model.
        if p.len() == 10 && st.len() >= 3 {
            total += 1;
            if sd(p) > sd(st) {
                above += 1;
            }
        }
    }
    eprintln!("protocol SD > sampling SD in {above} of {total} complete cells");
    assert!(total >= 200, "{total} complete cells");
    assert!(above as f64 >= 0.8 * total as f64);
    for ((m, _, _), (a, b)) in &s0 {
        if *m != "simulated-api-09" {
            assert_eq!(
                a, b,
                "{m}: S0 and S0r differ although temperature 0 is honoured"
            );
        }
    }
    assert!(s0
        .iter()
        .any(|((m, _, _), (a, b))| *m == "simulated-api-09" && a != b));
}

fn sha256(p: &Path) -> String {
    protospread_core::sha256_file(p).unwrap()
}

/// A configuration with one stored-answer input `mine` at `path` (beside it).
fn answers_config(path: &str, sha: &str) -> String {
    format!(
        "[study]\nname = \"t\"\n\n[[inputs]]\nname = \"mine\"\nrole = \"answers\"\npath = \"{path}\"\nsha256 = \"{sha}\"\n"
    )
}

/// `protospread fetch` with the configuration `cfg` into `out`.
fn fetch_with(cfg: &Path, out: &Path) -> std::process::Output {
    bin()
        .args(["--quiet", "--config"])
        .arg(cfg)
        .arg("--out")
        .arg(out)
        .arg("fetch")
        .output()
        .unwrap()
}

/// A bad stored-answer file stops `protospread fetch` with file/row/column, and the previous
/// outputs (here from a good file) stay exactly as they were; `score` writes nothing new.
#[test]
fn bad_stored_answer_file_writes_nothing_downstream() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("answers.csv");
    let cfg = dir.path().join("pipeline.toml");
    let out = dir.path().join("out");
    let write_cfg = |sha: &str| fs_err::write(&cfg, answers_config("answers.csv", sha)).unwrap();
    let fetch = || fetch_with(&cfg, &out);
    fs_err::write(
        &data,
        format!("{HEADER}\n{}\n", csv_row("S0", "m", "1", 1, "3")),
    )
    .unwrap();
    write_cfg(&sha256(&data));
    let ok = fetch();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let fetched = out.join("fetch/answers/mine.parquet");
    let before = fs_err::read(&fetched).unwrap();

    for (bad, col) in [
        (csv_row("S7", "m", "1", 2, "3"), "column condition"),
        (csv_row("S0", "", "1", 2, "3"), "column model"),
        (csv_row("S0", "m", "first", 2, "3"), "column sample"),
    ] {
        fs_err::write(
            &data,
            format!("{HEADER}\n{}\n{bad}\n", csv_row("S0", "m", "1", 1, "3")),
        )
        .unwrap();
        write_cfg(&sha256(&data));
        let o = fetch();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(
            err.contains("answers.csv") && err.contains("row 2 (line 3)") && err.contains(col),
            "{err}"
        );
        assert_eq!(
            fs_err::read(&fetched).unwrap(),
            before,
            "previous output changed"
        );
        assert!(!out.join("score").exists());
    }
}

/// Parsing and scoring of a small administration, end to end through `parse_and_score`:
/// reversed options mapped back, statuses, constant flag, z and percentile from the norms.
#[test]
fn parse_and_score_small_case() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = format!("{HEADER}\n");
    // S0: every Dark Triad item answered option 3 (value 2): constant.
    for i in 1..=18 {
        text.push_str(&format!(
            "1,st,m,api,full,S0,1,dark_triad,single,{i},,,human,P1,0,3,,\n"
        ));
    }
    // SR: option k on item k%5+1 pattern, reversed: value 5 - option; item 18 unreadable.
    for i in 1..=18 {
        let reply = if i == 18 {
            "Agree".to_string()
        } else {
            ((i % 5) + 1).to_string()
        };
        text.push_str(&format!(
            "1,st,m,api,full,SR,1,dark_triad,single,{i},,,reversed,P1,0,{reply},,\n"
        ));
    }
    let p = write(dir.path(), "small.csv", &text);
    let recs = read_records(&p, &Vocabulary::default()).unwrap();
    let key = key();
    let norms = Norms::from_scores(
        ["machiavellianism", "narcissism", "psychopathy"]
            .iter()
            .flat_map(|d| {
                [
                    ("dark_triad", *d, 40.0),
                    ("dark_triad", *d, 50.0),
                    ("dark_triad", *d, 60.0),
                ]
            }),
    );
    let (parsed, scales, sum) =
        parse_and_score("small", None, &recs, &Vocabulary::default(), &key, &norms).unwrap();
    assert_eq!(parsed.len(), 36);
    assert_eq!(sum.constant_administrations, 1);
    for p in parsed.iter().filter(|p| p.condition == "SR" && p.item < 18) {
        let opt = (p.item % 5) + 1;
        assert_eq!(p.option_replied, Some(opt));
        assert_eq!(p.value, Some(5 - opt), "item {}", p.item);
    }
    let last = parsed
        .iter()
        .find(|p| p.condition == "SR" && p.item == 18)
        .unwrap();
    assert_eq!((last.status, last.value), (NotANumber, None));
    // S0: complete, all constant; z and percentile follow the norms (mean 50, SD 10).
    let s0: Vec<_> = scales.iter().filter(|s| s.condition == "S0").collect();
    assert_eq!(s0.len(), 3);
    for s in &s0 {
        assert!(s.complete && s.constant_answers);
        let v = s.score.unwrap();
        assert_eq!(s.z, Some((v - 50.0) / 10.0));
        let below = [40.0, 50.0, 60.0].iter().filter(|x| **x < v).count() as f64;
        let eq = [40.0, 50.0, 60.0].iter().filter(|x| **x == v).count() as f64;
        assert_eq!(s.percentile, Some(100.0 * (below + 0.5 * eq) / 3.0));
    }
    // SR: the dimension holding item 18 is incomplete, with no score, z or percentile.
    let sr: Vec<_> = scales.iter().filter(|s| s.condition == "SR").collect();
    assert_eq!(sr.iter().filter(|s| !s.complete).count(), 1);
    for s in sr {
        assert!(!s.constant_answers);
        assert_eq!(s.complete, s.score.is_some());
        assert_eq!(s.complete, s.z.is_some());
        assert_eq!(s.n_answered < s.n_items, !s.complete);
    }
    // Rows are sorted by (model, condition, sample, test, item / dimension).
    let keys: Vec<_> = parsed
        .iter()
        .map(|p| (p.condition.clone(), p.item))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

/// Issue 10, item 10: an empty JSONL file (or one of blank lines) is refused like an empty CSV.
#[test]
fn empty_jsonl_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("empty.jsonl", ""), ("blank.jsonl", "\n\r\n\n")] {
        let p = write(dir.path(), name, text);
        let e = import_file(&p).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains("empty file"), "{e}");
    }
    let p = write(dir.path(), "empty.csv", "");
    let e = import_file(&p).unwrap_err().to_string();
    assert!(e.contains("empty file"), "{e}");
}

const GOOD_JSON: &str = r#"{"format_version":1,"study":"st","model":"m","arm":"api","condition":"S0","sample":1,"test":"dark_triad","mode":"single","item":1,"option_order":"human","instruction":"P1","reply":"3"}"#;

/// Issue 10, item 10: a JSON object with a key twice is refused, naming the row and the key
/// (serde_json alone would keep the last value silently).
#[test]
fn duplicate_json_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let second = GOOD_JSON
        .replace("\"item\":1", "\"item\":2")
        .replace("\"reply\":\"3\"", "\"reply\":\"3\",\"reply\":\"4\"");
    let p = write(
        dir.path(),
        "dup.jsonl",
        &format!("{GOOD_JSON}\n\n{second}\n"),
    );
    let e = import_file(&p).unwrap_err().to_string();
    assert!(
        e.contains("dup.jsonl: row 2 (line 3), column reply: key appears twice"),
        "{e}"
    );
}

/// Issue 10, item 10: invalid UTF-8 in a JSONL or CSV file is reported with its row and line,
/// not only a byte offset.
#[test]
fn invalid_utf8_names_row_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = format!("{GOOD_JSON}\n").into_bytes();
    let bad = GOOD_JSON
        .replace("\"item\":1", "\"item\":2")
        .replace("\"m\"", "\"m\u{e9}\"");
    let mut bad = bad.into_bytes();
    // Cut the two-byte é to its first byte: invalid UTF-8 inside the model name.
    let at = bad.windows(2).position(|w| w == [0xc3, 0xa9]).unwrap();
    bad.remove(at + 1);
    bytes.extend_from_slice(&bad);
    bytes.push(b'\n');
    let p = dir.path().join("bad.jsonl");
    fs_err::write(&p, &bytes).unwrap();
    let e = import_file(&p).unwrap_err().to_string();
    assert!(
        e.contains("bad.jsonl: row 2 (line 2)") && e.contains("not UTF-8"),
        "{e}"
    );

    let mut csv = format!("{HEADER}\n{}\n", csv_row("S0", "m", "1", 1, "3")).into_bytes();
    csv.extend_from_slice(csv_row("S0", "m", "1", 2, "3").as_bytes());
    csv.extend_from_slice(b"\xff\n");
    let p = dir.path().join("bad.csv");
    fs_err::write(&p, &csv).unwrap();
    let e = import_file(&p).unwrap_err().to_string();
    assert!(
        e.contains("bad.csv: row 2 (line 3)") && e.contains("not UTF-8"),
        "{e}"
    );
}

/// Issue 10, item 10: when one request of an administration has another setting than the
/// rest, that request is named, whether it sorts first, in the middle or last.
#[test]
fn consistency_error_names_the_edited_row() {
    let dir = tempfile::tempdir().unwrap();
    for edited in 1..=3u32 {
        let mut text = format!("{HEADER}\n");
        // Rows in file order: items 3, 1, 2 (so file order differs from sort order).
        for (row, item) in [(1u32, 3u32), (2, 1), (3, 2)] {
            let r = csv_row("S0", "m", "1", item, "3");
            let r = if row == edited {
                r.replace(",P1,", ",P2,")
            } else {
                r
            };
            text.push_str(&r);
            text.push('\n');
        }
        let p = write(dir.path(), &format!("edit{edited}.csv"), &text);
        let e = import_file(&p).unwrap_err().to_string();
        let line = edited + 1;
        assert!(
            e.contains(&format!(
                "row {edited} (line {line}), column instruction: differs from row"
            )),
            "edited row {edited}: {e}"
        );
    }
}

/// The parsing table holds verbatim through the score stage's plan: each reply as a
/// single-item request of RIASEC item k, read by the `strict_readings` function inside
/// DataFusion, gives the same status and option as the plain rule.
#[test]
fn parsing_table_through_the_plan() {
    assert!(TABLE.len() <= 60, "one RIASEC item per reply");
    let records: Vec<StoredRecord> = TABLE
        .iter()
        .enumerate()
        .map(|(k, (reply, _, _))| StoredRecord {
            format_version: 1,
            study: "t".into(),
            model: "m".into(),
            arm: protospread_format::Arm::Api,
            cohort: None,
            condition: "S0".into(),
            sample: 1,
            test: "riasec".into(),
            mode: protospread_format::Mode::Single,
            item: Some(k as i32 + 1),
            item_order: None,
            order_seed: None,
            option_order: OptionOrder::Reversed,
            instruction: "P1".into(),
            temperature: Some(0.0),
            reply: reply.to_string(),
            error: None,
            label: None,
        })
        .collect();
    let (parsed, _, summary) = parse_and_score(
        "table",
        None,
        &records,
        &Vocabulary::default(),
        &key(),
        &Norms::default(),
    )
    .unwrap();
    assert_eq!(parsed.len(), TABLE.len());
    for (row, (reply, status, option)) in parsed.iter().zip(TABLE) {
        assert_eq!(
            (row.status, row.option_replied),
            (*status, *option),
            "reply {reply:?}"
        );
        let want = match status {
            Ok => option_to_value(option.unwrap(), OptionOrder::Reversed),
            _ => None,
        };
        assert_eq!(row.value, want, "reply {reply:?}");
    }
    assert_eq!(summary.records, TABLE.len());
}

/// Requests of several models, arms, cohorts, conditions and samples, whose settings differ
/// between administrations (temperatures -0, 0, 0.7 and none; labels, instructions, option
/// orders, seeds), valid together: every value the import stages as a code meets the sort.
fn varied_records() -> Vec<StoredRecord> {
    use protospread_format::Arm;
    let mut recs = Vec::new();
    for m in 0..7 {
        let arm = [Arm::Api, Arm::Cli, Arm::Local][m % 3];
        let cohort = (m % 2 == 0).then(|| format!("c{}", m % 4));
        for (k, condition) in ["S0", "SR", "ST1", "B0"].iter().enumerate() {
            for sample in 1..=(1 + (m + k) % 3) as i32 {
                let whole = *condition == "B0";
                let items: Vec<Option<i32>> = if whole {
                    vec![None]
                } else {
                    (1..=18).map(Some).collect()
                };
                for item in items {
                    let mut r = protospread_testutils::local_request(
                        "dark_triad",
                        18,
                        condition,
                        sample,
                        item,
                        &format!("{}", 1 + (m + k + item.unwrap_or(0) as usize) % 5),
                    );
                    r.model = format!("model-{}", (m * 37) % 7);
                    r.arm = arm;
                    r.cohort = cohort.clone();
                    r.temperature = [Some(0.0), Some(-0.0), Some(0.7), None][(m + k) % 4];
                    r.label = (k % 2 == 1).then(|| format!("run {m}"));
                    r.instruction = ["P1", "P2"][(m + sample as usize) % 2].into();
                    r.option_order = [OptionOrder::Human, OptionOrder::Reversed][k % 2];
                    if whole {
                        r.order_seed = Some(100 + m as i64);
                    }
                    recs.push(r);
                }
            }
        }
    }
    recs
}

/// `recs` as a Parquet file `name` in `dir`.
fn parquet_of(dir: &Path, recs: &[StoredRecord], name: &str) -> PathBuf {
    let p = dir.join(name);
    let b = protospread_format::to_batch(recs).unwrap();
    protospread_core::write_parquet(&p, b.schema(), &[b], &protospread_core::FileMeta::default())
        .unwrap();
    p
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(8))]
    /// Whatever the order of a file's rows, the import hands on the same records in key
    /// order, with every value as it was (the shuffled file goes through the coded sort).
    #[test]
    fn any_row_order_gives_the_same_records(seed in proptest::prelude::any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let mut recs = varied_records();
        let mut sorted = recs.clone();
        sorted.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        let mut state = seed | 1;
        for i in (1..recs.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            recs.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let got = read_records(&parquet_of(dir.path(), &recs, "shuffled.parquet"), &Vocabulary::default()).unwrap();
        proptest::prop_assert_eq!(got.len(), sorted.len());
        for (g, s) in got.iter().zip(&sorted) {
            proptest::prop_assert_eq!(g, s);
            proptest::prop_assert_eq!(
                g.temperature.map(f64::to_bits),
                s.temperature.map(f64::to_bits)
            );
        }
    }
}

/// A key too wide to pack into 64 bits (eight models: 3 bits; samples and items spanning 31
/// bits each) is sorted by its columns instead, with the same result.
#[test]
fn a_key_too_wide_to_pack_is_still_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let section = protospread_core::AnswersSection {
        extra_tests: vec![protospread_core::AnswersExtraTest {
            name: "huge".into(),
            items: 2_000_000_000,
        }],
        ..Default::default()
    };
    let vocab = Vocabulary::from_section(&section);
    let mut recs = Vec::new();
    for (m, sample, item) in [
        ("b", 2_000_000_000, 2_000_000_000),
        ("a", 1, 1),
        ("b", 1, 7),
        ("a", 2_000_000_000, 1),
        ("a", 1, 2_000_000_000),
        ("h", 1, 1),
        ("d", 1, 1),
        ("g", 1, 1),
        ("c", 1, 1),
        ("f", 1, 1),
        ("e", 1, 1),
    ] {
        let mut r = protospread_testutils::keyed_request(m, "S0", sample, "huge", Some(item));
        r.instruction = "P1".into();
        recs.push(r);
    }
    let p = parquet_of(dir.path(), &recs, "wide.parquet");
    let mut out = Vec::new();
    protospread_fetch::import_into(
        &p,
        &vocab,
        &protospread_engine::EngineOptions::default(),
        &mut out,
    )
    .unwrap();
    let got = protospread_format::from_batches(&out, &p).unwrap();
    recs.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    assert_eq!(got, recs);
}
