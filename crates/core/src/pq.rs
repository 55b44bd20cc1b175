//! Parquet I/O with pinned writer settings.
//!
//! The same record batches always encode to the same bytes: the writer version, `created_by`,
//! compression, encodings, row-group size, page limits and statistics level are fixed here and
//! nothing of the run (time, host, thread count) is written into the file.
//!
//! Every file also carries its provenance in its key-value metadata, given by the caller as a
//! [`FileMeta`] (see [`crate::Provenance`]): its table and layout version, the stage and command
//! that wrote it, the protospread version and the sha256 of the configuration and of the inputs
//! it is computed from. These depend only on the inputs, so they do not break byte-for-byte
//! reproduction.

use crate::provenance::FileMeta;
use crate::{CoreError, Result};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use std::path::Path;
use std::sync::Arc;

/// The `created_by` string written into every Parquet footer. It names the format, not the
/// build, so that a rebuild of the tool does not change output bytes.
pub(crate) const CREATED_BY: &str = "protospread (parquet-rs 59, pinned writer settings v1)";

/// Rows per row group; large enough that every table of the study is one row group.
pub(crate) const MAX_ROW_GROUP_SIZE: usize = 1 << 20;

/// The pinned writer settings, with `meta` as the file's key-value metadata.
pub fn parquet_writer_properties(meta: &FileMeta) -> WriterProperties {
    pinned(meta).build()
}

/// The pinned writer settings with column-chunk statistics (min, max, null count) for the
/// columns `stats_columns` only: for a table with a row per request or per answer, whose other
/// columns hold their few values in every row group or are free text, so that their statistics
/// could not prune a read, yet computing them compares every value (measured at 10^6 answers:
/// 10 % of the fetch stage's instructions, 5 % of the score stage's).
pub fn parquet_writer_properties_with_statistics(
    meta: &FileMeta,
    stats_columns: &[&str],
) -> WriterProperties {
    stats_columns
        .iter()
        .fold(
            pinned(meta).set_statistics_enabled(EnabledStatistics::None),
            |b, c| {
                b.set_column_statistics_enabled(
                    parquet::schema::types::ColumnPath::from(*c),
                    EnabledStatistics::Chunk,
                )
            },
        )
        .build()
}

fn pinned(meta: &FileMeta) -> parquet::file::properties::WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_created_by(CREATED_BY.to_string())
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(true)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(MAX_ROW_GROUP_SIZE))
        .set_data_page_size_limit(1 << 20)
        .set_write_batch_size(1024)
        .set_key_value_metadata(meta.key_values())
}

/// Encode batches to Parquet bytes in memory, with `meta` as key-value metadata. `path` only
/// names the output in errors.
pub fn encode_parquet(
    path: &Path,
    schema: SchemaRef,
    batches: &[RecordBatch],
    meta: &FileMeta,
) -> Result<Vec<u8>> {
    let perr = |e: parquet::errors::ParquetError| CoreError::parquet(path, e);
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, schema, Some(parquet_writer_properties(meta)))
        .map_err(perr)?;
    for b in batches {
        w.write(b).map_err(perr)?;
    }
    w.close().map_err(perr)?;
    Ok(buf)
}

/// Encode (with `meta` as key-value metadata) and write atomically.
pub fn write_parquet(
    path: &Path,
    schema: SchemaRef,
    batches: &[RecordBatch],
    meta: &FileMeta,
) -> Result<()> {
    let bytes = encode_parquet(path, schema, batches, meta)?;
    crate::atomic_file::write_atomic(path, &bytes)
}

/// A Parquet file of `schema` whose encoded column chunks are those of the Parquet file `src`
/// (its bytes; `path` names it in errors), copied byte for byte row group by row group, under
/// a footer written with the pinned settings (`created_by`, `meta` and the Arrow
/// schema in its key-value metadata, no page index). For a file whose records are already
/// exactly what a writer would be given, this is the same table as encoding them again,
/// without the encoding: the chunks keep `src`'s encodings, compression, pages and
/// statistics, so the bytes depend on `src` and `meta` only. Each column of `src`
/// must have the type, repetition and path the pinned writer gives the same column of
/// `schema`; otherwise this is an error naming `path`.
pub fn copy_parquet_chunks(
    path: &Path,
    src: Vec<u8>,
    schema: SchemaRef,
    meta: &FileMeta,
) -> Result<Vec<u8>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::writer::SerializedFileWriter;
    let perr = |e: parquet::errors::ParquetError| CoreError::parquet(path, e);
    let src = bytes::Bytes::from(src);
    let reader = SerializedFileReader::new(src.clone()).map_err(perr)?;
    let mut props = parquet_writer_properties(meta);
    parquet::arrow::add_encoded_arrow_schema_to_metadata(&schema, &mut props);
    let descr = parquet::arrow::ArrowSchemaConverter::new()
        .convert(&schema)
        .map_err(perr)?;
    let mut w = SerializedFileWriter::new(Vec::new(), descr.root_schema_ptr(), Arc::new(props))
        .map_err(perr)?;
    for rg in reader.metadata().row_groups() {
        let mut g = w.next_row_group().map_err(perr)?;
        for col in rg.columns() {
            let close = parquet::column::writer::ColumnCloseResult {
                bytes_written: col.compressed_size() as u64,
                rows_written: rg.num_rows() as u64,
                metadata: col.clone(),
                bloom_filter: None,
                column_index: None,
                offset_index: None,
            };
            g.append_column(&src, close).map_err(perr)?;
        }
        g.close().map_err(perr)?;
    }
    w.into_inner().map_err(perr)
}

/// Read every batch of a Parquet file.
pub fn read_parquet(path: &Path) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let perr = |e: parquet::errors::ParquetError| CoreError::parquet(path, e);
    let f = fs_err::File::open(path)
        .map_err(CoreError::Fs)?
        .into_parts()
        .0;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(perr)?;
    let schema = builder.schema().clone();
    let reader = builder.build().map_err(perr)?;
    let mut out = Vec::new();
    for b in reader {
        out.push(b.map_err(|e| CoreError::parquet(path, e))?);
    }
    Ok((schema, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int8Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    #[test]
    fn same_batches_same_bytes_and_roundtrip() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int8, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int8Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![Some("x"), None, Some("z")])),
            ],
        )
        .unwrap();
        let p = Path::new("t.parquet");
        let none = FileMeta::default();
        let x = encode_parquet(p, schema.clone(), std::slice::from_ref(&b), &none).unwrap();
        let y = encode_parquet(p, schema.clone(), std::slice::from_ref(&b), &none).unwrap();
        assert_eq!(x, y);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.parquet");
        write_parquet(&f, schema, std::slice::from_ref(&b), &none).unwrap();
        let (_, got) = read_parquet(&f).unwrap();
        assert_eq!(got, vec![b]);
    }

    #[test]
    fn statistics_only_on_the_named_columns() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let schema = Arc::new(Schema::new(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("text", DataType::Utf8, false),
        ]));
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["a", "b"])),
                Arc::new(StringArray::from(vec!["free", "text"])),
            ],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("t.parquet");
        let props = parquet_writer_properties_with_statistics(&FileMeta::default(), &["key"]);
        let mut w =
            ArrowWriter::try_new(fs_err::File::create(&f).unwrap(), schema, Some(props)).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        let r = SerializedFileReader::new(fs_err::File::open(&f).unwrap().into_parts().0).unwrap();
        let rg = r.metadata().row_group(0);
        let stats = rg.column(0).statistics().expect("the key has statistics");
        assert_eq!(stats.min_bytes_opt(), Some(&b"a"[..]));
        assert_eq!(stats.max_bytes_opt(), Some(&b"b"[..]));
        assert!(rg.column(1).statistics().is_none(), "no statistics on text");
    }
}
