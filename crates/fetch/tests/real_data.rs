//! The nine embedded JobCannon files import cell for cell: every value read back from the
//! Parquet equals the CSV text under the documented rule (checked here with the csv crate's
//! string records and chrono, not with the importer's own parsers).

use arrow::array::{
    Array, Int32Array, Int64Array, Int8Array, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::DataType;
use protospread_core::{instrument_schema, ALL_INSTRUMENTS};
use protospread_fetch::import_human_csv_reporting;
use std::path::PathBuf;

fn data(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/jobcannon")
        .join(file)
}

#[test]
fn every_cell_of_every_file_survives_csv_to_parquet_and_back() {
    for inst in ALL_INSTRUMENTS {
        let path = data(&inst.file_name());
        let bytes = fs_err::read(&path).unwrap();
        let imported = import_human_csv_reporting(&path, &bytes, inst).unwrap();
        let batch = imported.batch;
        // The one reported exclusion of the data (docs/fetch.md): career_match row 1139.
        let excluded: Vec<usize> = imported.excluded.iter().map(|x| x.row).collect();
        if inst.name == "career_match" {
            assert_eq!(excluded, vec![1139]);
        } else {
            assert!(excluded.is_empty(), "{}: {excluded:?}", inst.name);
        }
        assert_eq!(batch.schema(), instrument_schema(inst));

        // Parquet round trip through the pinned writer.
        let dir = tempfile::tempdir().unwrap();
        let pq = dir.path().join("t.parquet");
        protospread_core::write_parquet(
            &pq,
            batch.schema(),
            std::slice::from_ref(&batch),
            &protospread_core::FileMeta::default(),
        )
        .unwrap();
        let (_, back) = protospread_core::read_parquet(&pq).unwrap();
        let back = arrow::compute::concat_batches(&batch.schema(), &back).unwrap();
        assert_eq!(back, batch, "{}", inst.name);

        let mut rdr = csv::Reader::from_path(&path).unwrap();
        let header = rdr.headers().unwrap().clone();
        assert_eq!(header.iter().collect::<Vec<_>>(), inst.columns());
        let mut n = 0;
        for (csv_row, rec) in rdr.records().enumerate() {
            let rec = rec.unwrap();
            if excluded.contains(&(csv_row + 1)) {
                continue;
            }
            let r = n;
            // The card's "only canonical-length submissions": every row has every column.
            assert_eq!(
                rec.len(),
                inst.columns().len(),
                "{} row {}",
                inst.name,
                r + 1
            );
            for (c, field) in back.schema().fields().iter().enumerate() {
                let cell = &rec[c];
                let col = back.column(c);
                let at = format!("{} row {} column {}", inst.name, r + 1, field.name());
                if cell.is_empty() {
                    assert!(field.is_nullable() && col.is_null(r), "{at}");
                    continue;
                }
                assert!(col.is_valid(r), "{at}");
                let got = match field.data_type() {
                    DataType::Int64 => col
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .unwrap()
                        .value(r)
                        .to_string(),
                    DataType::Int32 => col
                        .as_any()
                        .downcast_ref::<Int32Array>()
                        .unwrap()
                        .value(r)
                        .to_string(),
                    DataType::Int8 => col
                        .as_any()
                        .downcast_ref::<Int8Array>()
                        .unwrap()
                        .value(r)
                        .to_string(),
                    DataType::Utf8 => col
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .unwrap()
                        .value(r)
                        .to_string(),
                    DataType::Timestamp(_, _) => {
                        let v = col
                            .as_any()
                            .downcast_ref::<TimestampMicrosecondArray>()
                            .unwrap()
                            .value(r);
                        let want = chrono::DateTime::parse_from_rfc3339(cell)
                            .unwrap()
                            .timestamp_micros();
                        assert_eq!(v, want, "{at}");
                        continue;
                    }
                    other => panic!("{at}: unexpected type {other}"),
                };
                assert_eq!(got, cell, "{at}");
            }
            n += 1;
        }
        assert_eq!(n, batch.num_rows(), "{}", inst.name);
    }
}
