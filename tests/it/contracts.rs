//! Every table that passes between stages is exactly what its contract declares
//! (`protospread_core::CONTRACTS`): run the pipeline on the embedded data and compare each file
//! written with its contract, column by column, and check that its rows come in the order of
//! its sort key. A column added to a contract but not derived by a writer (or a writer's column
//! missing from the contract) fails here.

use arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::compute::SortOptions;
use arrow::row::{RowConverter, SortField};
use protospread_core::{TableContract, CONTRACTS, REPLY_RULES as RULE_NAMES};
use protospread_testutils::read_table;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `table` in a finished run's output folder: one per input in a folder of the
/// table's name (the stored answers), else `<stage>/<name>.parquet`.
fn files_of(out: &Path, table: &TableContract) -> Vec<PathBuf> {
    let dir = out.join(table.stage).join(table.name);
    if dir.is_dir() {
        let mut v: Vec<PathBuf> = fs_err::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect();
        v.sort();
        v
    } else {
        vec![out.join(table.stage).join(table.file_name())]
    }
}

/// A key column as the table orders it: a `rule` in the configured order of the reply rules
/// (strict first), every other column as it is.
fn ordered(name: &str, col: &ArrayRef) -> ArrayRef {
    if name != "rule" {
        return col.clone();
    }
    let rank: arrow::array::Int32Array = col
        .as_string::<i32>()
        .iter()
        .map(|r| {
            let r = r.expect("rule is never null");
            RULE_NAMES.iter().position(|n| *n == r).map(|i| i as i32)
        })
        .collect();
    Arc::new(rank)
}

/// The first pair of rows of `batch` out of the order of `table`'s sort key, as a message.
fn check_sorted(path: &Path, table: &TableContract, batch: &RecordBatch) -> Result<(), String> {
    let key = table.sorted_by();
    let cols: Vec<ArrayRef> = key
        .iter()
        .map(|(k, _)| ordered(k, batch.column_by_name(k).unwrap()))
        .collect();
    let fields = key
        .iter()
        .zip(&cols)
        .map(|((_, nulls_first), c)| {
            SortField::new_with_options(
                c.data_type().clone(),
                SortOptions {
                    descending: false,
                    nulls_first: *nulls_first,
                },
            )
        })
        .collect();
    let rows = RowConverter::new(fields)
        .unwrap()
        .convert_columns(&cols)
        .unwrap();
    match (1..rows.num_rows()).find(|&i| rows.row(i - 1) > rows.row(i)) {
        Some(i) => Err(format!(
            "{}: row {} comes before row {} but is greater by the sort key {:?}",
            path.display(),
            i,
            i + 1,
            table.sort_key
        )),
        None => Ok(()),
    }
}

/// A finished run of the pipeline on the embedded data: its temporary folder and output folder.
fn run_pipeline() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(repo())
        .args(["--quiet", "--out", out.to_str().unwrap(), "run"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (dir, out)
}

#[test]
fn every_table_between_stages_is_exactly_its_contract() {
    let (_dir, out) = run_pipeline();
    for table in CONTRACTS {
        let files = files_of(&out, table);
        assert!(!files.is_empty(), "no file of table {}", table.name);
        for path in files {
            let batch = read_table(&path);
            let want = table.schema();
            let got = batch.schema();
            let describe = |s: &arrow::datatypes::Schema| {
                s.fields()
                    .iter()
                    .map(|f| format!("{} {} {}", f.name(), f.data_type(), f.is_nullable()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                describe(&got),
                describe(&want),
                "{}: columns differ from the contract of {}",
                path.display(),
                table.name
            );
            assert!(batch.num_rows() > 0, "{}: no rows", path.display());
            check_sorted(&path, table, &batch).unwrap();
            for c in table.required() {
                assert_eq!(
                    batch.column_by_name(c).unwrap().null_count(),
                    0,
                    "{}: required column {c} has nulls",
                    path.display()
                );
            }
        }
    }
}

/// Every table the score and aggregate stages write is declared: a Parquet file in their
/// folders that no contract of the stage names fails here.
#[test]
fn every_table_of_the_score_and_aggregate_stages_is_declared() {
    let (_dir, out) = run_pipeline();
    for stage in ["score", "aggregate"] {
        let mut written: Vec<String> = fs_err::read_dir(out.join(stage))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".parquet"))
            .collect();
        written.sort();
        let mut declared: Vec<String> = CONTRACTS
            .iter()
            .filter(|c| c.stage == stage)
            .map(|c| c.file_name())
            .collect();
        declared.sort();
        assert_eq!(
            written, declared,
            "the {stage} stage's tables and contracts"
        );
    }
}

/// The order check itself refuses a table out of order (so the test above can fail).
#[test]
fn an_unsorted_table_is_caught() {
    const T: TableContract = TableContract::new(
        "t",
        "score",
        1,
        &[&[protospread_core::Column::required(
            "model",
            protospread_core::ColumnType::Text,
        )]],
        &["model"],
    );
    let batch = RecordBatch::try_new(
        T.schema(),
        vec![Arc::new(StringArray::from(vec!["b", "a"])) as ArrayRef],
    )
    .unwrap();
    let e = check_sorted(Path::new("t.parquet"), &T, &batch).unwrap_err();
    assert!(e.contains("row 1 comes before row 2"), "{e}");
}
