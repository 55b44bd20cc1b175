//! The engine's synchronous API: options are checked, plans run within the pool, streams and
//! re-cut batches come out in order.
//!
//! These are integration tests on purpose: a unit-test build of this crate would compile
//! DataFusion's planner a second time (see the crate documentation).

use datafusion::arrow::array::RecordBatch;
use protospread_engine::{Engine, EngineOptions, Rechunk};
use std::sync::Arc;

#[test]
fn refuses_out_of_range_options() {
    let small = EngineOptions {
        memory_limit: 1,
        ..Default::default()
    };
    let err = |o: &EngineOptions| Engine::new(o).expect_err("refused").to_string();
    assert!(err(&small).contains("below the minimum"));
    let many = EngineOptions {
        target_partitions: usize::MAX,
        ..Default::default()
    };
    assert!(err(&many).contains("maximum"));
}

#[test]
fn rechunk_cuts_fixed_batches_whatever_comes_in() {
    use datafusion::arrow::array::Int32Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int32, false)]));
    let batch = |a: i32, b: i32| {
        RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int32Array::from_iter_values(a..b))],
        )
        .unwrap()
    };
    for cuts in [
        vec![0, 10],
        vec![0, 3, 4, 9, 10],
        vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    ] {
        let mut r = Rechunk::new(4);
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            out.extend(r.push(batch(w[0], w[1])).unwrap());
        }
        out.extend(r.finish().unwrap());
        let sizes: Vec<usize> = out.iter().map(|b| b.num_rows()).collect();
        assert_eq!(sizes, [4, 4, 2], "cuts {cuts:?}");
        let values: Vec<i32> = out
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int32Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(values, (0..10).collect::<Vec<_>>());
    }
}

#[test]
fn runs_a_plan_within_the_pool() {
    let engine = Engine::new(&EngineOptions {
        target_partitions: 3,
        ..Default::default()
    })
    .unwrap();
    let sum = "SELECT sum(v) AS s FROM (VALUES (1), (2), (3)) AS t(v)";
    let value = |b: &RecordBatch| {
        b.column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .unwrap()
            .value(0)
    };
    assert_eq!(value(&engine.query(sum).unwrap()[0]), 6);
    assert_eq!(value(&engine.first_row(sum).unwrap().unwrap()), 6);
    let none = "SELECT v FROM (VALUES (1)) AS t(v) WHERE v > 1";
    assert!(engine.first_row(none).unwrap().is_none());
    let streamed: usize = engine
        .stream(
            engine
                .sql("SELECT * FROM generate_series(1, 20000)")
                .unwrap(),
        )
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(streamed, 20000);
}

/// A bound value is a value wherever it stands: a name holding quotes, a backslash and SQL
/// matches itself and injects nothing, in a comparison, an `IN` list, a `CASE x WHEN`, a
/// `CREATE VIEW` and a select list in a `UNION ALL`, and the executed plan holds literals.
#[test]
fn bound_values_are_values_in_every_position() {
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::ScalarValue;
    let engine = Engine::new(&EngineOptions::default()).unwrap();
    let nasty = "x' OR '1'='1\\'; DROP VIEW w; --";
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a", nasty, "b", "x"])),
            Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
        ],
    )
    .unwrap();
    engine.register_batches("t", schema, vec![batch]).unwrap();
    let text = |v: &str| ScalarValue::Utf8(Some(v.to_string()));
    let rows = |sql: &str, params: Vec<ScalarValue>| -> Vec<String> {
        let df = engine.sql_with_params(sql, params).unwrap();
        let mut out = Vec::new();
        for b in engine.collect(df).unwrap() {
            let b = datafusion::arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
            let b = b.as_any().downcast_ref::<StringArray>().unwrap();
            out.extend(b.iter().map(|x| x.unwrap_or("NULL").to_string()));
        }
        out
    };
    let v = "SELECT CAST(v AS VARCHAR) AS s FROM t WHERE";
    assert_eq!(rows(&format!("{v} name = $1"), vec![text(nasty)]), ["2"]);
    assert_eq!(
        rows(
            &format!("{v} name IN ($1, $2) ORDER BY v"),
            vec![text(nasty), text("b")]
        ),
        ["2", "3"]
    );
    assert_eq!(
        rows(
            "SELECT CAST(CASE name WHEN $1 THEN 10 WHEN $2 THEN 20 END AS VARCHAR) AS s FROM t ORDER BY v",
            vec![text("a"), text(nasty)]
        ),
        ["10", "20", "NULL", "NULL"]
    );
    engine
        .collect(
            engine
                .sql_with_params(
                    "CREATE VIEW w AS SELECT arrow_cast($1, 'Utf8') AS tag, v FROM t WHERE name = $1 \
                     UNION ALL SELECT name, v FROM t WHERE v = 1",
                    vec![text(nasty)],
                )
                .unwrap(),
        )
        .unwrap();
    assert_eq!(rows("SELECT tag FROM w ORDER BY v", vec![]), ["a", nasty]);
    // The plan that runs has the values as literals, no placeholder.
    let plan = rows(
        &format!("EXPLAIN {v} name IN ($1, $2)"),
        vec![text("a"), text("b")],
    )
    .join("\n");
    assert!(!plan.contains('$'), "{plan}");
    let missing = engine
        .sql_with_params(&format!("{v} name = $2"), vec![text("a")])
        .expect_err("no value for $2");
    assert!(missing.to_string().contains("$2"), "{missing}");
}

/// Every partition of a sort spills many files under a small pool (each partition also holds
/// back `sort_spill_reservation_bytes`, 10 MB, for its merge), then all partitions merge their
/// files at once. Those merge reservations cannot spill; without a fan-in limit
/// the first merge reserved a buffer for as many files as the pool allowed and another
/// partition's merge failed (how the score stage failed at 10^8 answers).
#[test]
fn spilled_sorts_of_every_partition_merge_within_a_small_pool() {
    let spill = tempfile::tempdir().unwrap();
    let engine = Engine::new(&EngineOptions {
        memory_limit: 256 << 20,
        target_partitions: 4,
        spill_dir: Some(spill.path().to_path_buf()),
    })
    .unwrap();
    // About 600 MB of rows, more than twice the pool, sorted by a key unrelated to their order.
    let rows = 2_400_000;
    let sorted = engine
        .sql(&format!(
            "SELECT (value * 7919) % {rows} AS k, repeat('x', 240) AS pad \
             FROM generate_series(1, {rows}) ORDER BY k"
        ))
        .unwrap();
    let mut seen = 0usize;
    let mut last = -1i64;
    for b in engine.stream(sorted).unwrap() {
        let b = b.unwrap();
        let k = b
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .unwrap();
        for v in k.values() {
            assert!(*v >= last, "out of order: {v} after {last}");
            last = *v;
        }
        seen += b.num_rows();
    }
    assert_eq!(seen, rows);
}

/// Two-column batches (`a` text, `b` integer) for the key-order checks.
fn keyed(rows: &[(&str, i32)]) -> RecordBatch {
    use datafusion::arrow::array::{Int32Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Utf8, false),
        Field::new("b", DataType::Int32, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(Int32Array::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
        ],
    )
    .expect("batch")
}

#[test]
fn key_order_accepts_increasing_keys_across_batches_and_names_the_first_row_out_of_order() {
    use protospread_engine::KeyOrder;
    let mut ok = KeyOrder::new(&["a", "b"]);
    ok.push(&keyed(&[("m1", 1), ("m1", 2), ("m2", -5)]))
        .expect("in order");
    ok.push(&keyed(&[])).expect("an empty batch");
    ok.push(&keyed(&[("m2", 0), ("m3", 0)])).expect("in order");

    // A repeat of the last key of the previous batch: row 3 overall.
    let mut repeat = KeyOrder::new(&["a", "b"]);
    repeat
        .push(&keyed(&[("x", 1), ("x", 2), ("y", 1)]))
        .expect("in order");
    let e = repeat
        .push(&keyed(&[("y", 1), ("z", 0)]))
        .expect_err("a repeated key")
        .to_string();
    assert!(e.contains("row 3 "), "{e}");

    // Out of order inside one batch: the second column decides within equal first columns.
    let mut back = KeyOrder::new(&["a", "b"]);
    let e = back
        .push(&keyed(&[("x", 1), ("x", 3), ("x", 2)]))
        .expect_err("b goes back")
        .to_string();
    assert!(e.contains("row 2 ") && e.contains("(a, b)"), "{e}");

    // Only the named columns count.
    let mut first = KeyOrder::new(&["a"]);
    first
        .push(&keyed(&[("x", 9), ("y", 1)]))
        .expect("a alone increases");
    let e = KeyOrder::new(&["c"])
        .push(&keyed(&[("x", 1)]))
        .expect_err("no such column")
        .to_string();
    assert!(e.contains("no key column c"), "{e}");
}

/// Rows of (a, b) with nulls, cut into batches at `cuts`.
fn nullable_batches(rows: &[(Option<String>, Option<i32>)], cuts: &[usize]) -> Vec<RecordBatch> {
    use datafusion::arrow::array::{Int32Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Utf8, true),
        Field::new("b", DataType::Int32, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(rows.iter().map(|r| r.0.clone()).collect::<StringArray>()),
            Arc::new(rows.iter().map(|r| r.1).collect::<Int32Array>()),
        ],
    )
    .expect("batch");
    let mut at = 0;
    let mut out = Vec::new();
    for &c in cuts.iter().chain(std::iter::once(&rows.len())) {
        let c = c.clamp(at, rows.len());
        out.push(batch.slice(at, c - at));
        at = c;
    }
    out
}

#[test]
fn key_order_puts_nulls_first() {
    use protospread_engine::KeyOrder;
    let s = |x: &str| Some(x.to_string());
    let rows = [
        (None, Some(1)),
        (s("m"), None),
        (s("m"), Some(-1)),
        (s("n"), None),
    ];
    let mut ok = KeyOrder::new(&["a", "b"]);
    for b in nullable_batches(&rows, &[1, 3]) {
        ok.push(&b).expect("nulls first, in order");
    }
    let back = [(s("m"), Some(1)), (s("m"), None)];
    let mut order = KeyOrder::new(&["a", "b"]);
    let e = order
        .push(&nullable_batches(&back, &[])[0])
        .expect_err("a null after a value")
        .to_string();
    assert!(e.contains("row 1 "), "{e}");
}

proptest::proptest! {
    /// The check finds exactly the first row, over all batches, whose key is not greater than
    /// the one before it in Arrow's row format (the order DataFusion sorts by), wherever the
    /// batches are cut.
    #[test]
    fn key_order_agrees_with_the_row_format(
        rows in proptest::collection::vec(
            (proptest::option::of("[ab]{0,2}"), proptest::option::of(-2i32..3)), 0..24),
        cuts in proptest::collection::vec(0usize..24, 0..4),
    ) {
        use datafusion::arrow::row::{RowConverter, SortField};
        use datafusion::arrow::datatypes::DataType;
        use protospread_engine::KeyOrder;
        let mut cuts = cuts;
        cuts.sort_unstable();
        let whole = nullable_batches(&rows, &[]).remove(0);
        let converter = RowConverter::new(vec![
            SortField::new(DataType::Utf8),
            SortField::new(DataType::Int32),
        ]).expect("converter");
        let encoded = converter
            .convert_columns(&[whole.column(0).clone(), whole.column(1).clone()])
            .expect("rows");
        let expected = (1..rows.len()).find(|&i| encoded.row(i - 1) >= encoded.row(i));
        let mut order = KeyOrder::new(&["a", "b"]);
        let mut found = None;
        for b in nullable_batches(&rows, &cuts) {
            if let Err(e) = order.push(&b) {
                found = Some(e.to_string());
                break;
            }
        }
        match expected {
            None => proptest::prop_assert!(found.is_none(), "{found:?}"),
            Some(i) => {
                let e = found.expect("a row out of order");
                proptest::prop_assert!(e.contains(&format!("row {i} ")), "{i}: {e}");
            }
        }
    }
}

/// A Parquet writer fed string views (`keeping_string_views`) writes the bytes it writes from
/// plain UTF-8, and the nullability of the schema is still enforced: the score stage hands its
/// writers the views it read instead of copying every text.
#[test]
fn kept_string_views_write_the_bytes_of_plain_texts() {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    let engine = Engine::new(&EngineOptions::default()).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("t", DataType::Utf8, false),
        Field::new("n", DataType::Int64, false),
    ]));
    // Texts shorter and longer than a view's 12 inline bytes, repeated and distinct.
    let sql = |null: &str| {
        format!(
            "SELECT arrow_cast(CASE WHEN value % 3 = 0 THEN 'a text longer than twelve bytes ' || value \
                    WHEN value = 778 THEN {null} ELSE 'short' END, 'Utf8View') AS t, value AS n \
             FROM generate_series(1, 20000) ORDER BY n"
        )
    };
    let write = |sql: &str, keep: bool| -> Result<(Vec<u8>, Vec<DataType>), String> {
        let df = engine.sql(sql).unwrap();
        let mut batches = engine.stream_for_writing(df, schema.clone()).unwrap();
        if keep {
            batches = batches.keeping_string_views();
        }
        let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), None).unwrap();
        let mut types = Vec::new();
        for b in batches {
            let b = b.map_err(|e| e.to_string())?;
            types.push(b.schema().field(0).data_type().clone());
            w.write(&b).unwrap();
        }
        Ok((w.into_inner().unwrap(), types))
    };
    let (plain, plain_types) = write(&sql("'x'"), false).unwrap();
    let (viewed, view_types) = write(&sql("'x'"), true).unwrap();
    assert!(plain_types.iter().all(|t| t == &DataType::Utf8));
    assert!(view_types.len() > 1 && view_types.iter().all(|t| t == &DataType::Utf8View));
    assert_eq!(plain, viewed);
    // Not `expect_err`: its message would print the whole file of an unexpected success.
    let Err(err) = write(&sql("NULL"), true) else {
        panic!("a null in a non-null column was not refused");
    };
    assert!(err.contains("non-nullable"), "{err}");
}
