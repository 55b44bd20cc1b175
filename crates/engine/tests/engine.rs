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
