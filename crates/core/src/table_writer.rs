//! A Parquet writer for large tables whose text and integer columns repeat their values row
//! after row.
//!
//! [`TableWriter`] writes what `parquet::arrow::ArrowWriter` writes with the same properties
//! (the same schema, row groups, encodings, compression, statistics and Arrow schema in the
//! footer), with one difference in how a dictionary-encoded text or 32-bit integer column is
//! encoded: the Arrow writer looks every value up in its dictionary (a hash and a comparison
//! per row; at 10^6 parsed answers with ten text columns, 30 % of the score stage's
//! instructions, and its five integer columns were another 8 % of the stage's time at 10^7),
//! where this one compares a value with the row before and looks it up only when it changes
//! (a small non-negative integer, such as an item number that changes every row, in an array).
//! A table sorted by its key holds each value in runs, so nearly every row costs one
//! comparison. The column chunk is the same Parquet (a PLAIN dictionary page, then
//! RLE_DICTIONARY data pages); its data pages hold at most `data_page_row_count_limit` rows
//! each, and the indices are RLE runs or bit-packed groups wherever the rows make them so (not
//! where the Arrow writer's buffering does), so the bytes can differ from the Arrow writer's;
//! they depend only on the rows.
//!
//! Such a column goes through the Arrow writer's own encoder when this one would not give
//! what that one gives: page-level statistics (a column index), a dictionary larger than
//! `dictionary_page_size_limit` (the Arrow writer falls back to plain pages), text min or max
//! statistics longer than `statistics_truncate_length`, or a bloom filter. Other columns
//! always do.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory};
use parquet::basic::{Compression, Encoding, EncodingMask, PageType};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{
    ColumnChunkMetaData, LevelHistogram, OffsetIndexBuilder, PageEncodingStats,
};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesPtr};
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, SchemaDescriptor};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

/// Writes record batches of one schema to a Parquet file (see the module documentation).
pub struct TableWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    columns: ArrowRowGroupWriterFactory,
    /// Row groups written so far.
    groups: usize,
    schema: SchemaRef,
    descr: Arc<SchemaDescriptor>,
    props: WriterPropertiesPtr,
    /// Whether each column may be encoded as runs ([`runs_eligible`]).
    eligible: Vec<bool>,
    /// The open row group: its columns and rows so far (none open when `None`).
    group: Option<Vec<Column>>,
    rows: usize,
    /// Key and level buffers of finished row groups, cleared, for the next ones: a row group's
    /// buffers reach a few MB per column, and allocated again for each row group they were
    /// page-faulted in again each time (the allocator returns freed pages to the system).
    spare: Vec<(Vec<u32>, Vec<u8>)>,
}

enum Column {
    Arrow(Box<ArrowColumnWriter>),
    Runs(Box<Runs>),
}

impl<W: Write + Send> TableWriter<W> {
    /// A writer of `schema` into `out` with `props`. The Arrow schema goes into the footer's
    /// key-value metadata as the Arrow writer puts it there.
    pub fn try_new(out: W, schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        let mut props = props;
        parquet::arrow::add_encoded_arrow_schema_to_metadata(&schema, &mut props);
        let descr = parquet::arrow::ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&schema)?;
        let flat = descr.num_columns() == schema.fields().len();
        let eligible = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| flat && runs_eligible(f.data_type(), &descr.column(i), &props))
            .collect();
        let props = Arc::new(props);
        let file = SerializedFileWriter::new(out, descr.root_schema_ptr(), props.clone())?;
        let columns = ArrowRowGroupWriterFactory::new(&file, schema.clone());
        Ok(TableWriter {
            file,
            columns,
            groups: 0,
            schema,
            descr: Arc::new(descr),
            props,
            eligible,
            group: None,
            rows: 0,
            spare: Vec::new(),
        })
    }

    /// Write `batch` (of the writer's schema, or one whose columns have the same names and
    /// nullability and equivalent types: texts as string views are written as texts).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_columns() != self.schema.fields().len() {
            return Err(ParquetError::General(format!(
                "batch has {} columns, the table {}",
                batch.num_columns(),
                self.schema.fields().len()
            )));
        }
        let max = self.props.max_row_group_row_count().unwrap_or(usize::MAX);
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take = (max - self.rows).min(batch.num_rows() - offset);
            self.write_part(&batch.slice(offset, take))?;
            offset += take;
            if self.rows >= max {
                self.flush_group()?;
            }
        }
        Ok(())
    }

    fn write_part(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.group.is_none() {
            let writers = self.columns.create_column_writers(self.groups)?;
            let group = writers
                .into_iter()
                .enumerate()
                .map(|(i, w)| {
                    if self.eligible.get(i) == Some(&true) {
                        let int = self.schema.field(i).data_type() == &DataType::Int32;
                        let buffers = self.spare.pop().unwrap_or_default();
                        Column::Runs(Box::new(Runs::new(self.descr.column(i), int, w, buffers)))
                    } else {
                        Column::Arrow(Box::new(w))
                    }
                })
                .collect();
            self.group = Some(group);
        }
        let group = self.group.as_mut().expect("opened above");
        let mut leaf = 0;
        for (field, array) in self.schema.fields().iter().zip(batch.columns()) {
            // A column of runs is a flat field: one leaf, and no levels to compute.
            if let Column::Runs(r) = &mut group[leaf] {
                if let Some(w) = r.push(array, &self.props)? {
                    group[leaf] = Column::Arrow(w);
                }
                leaf += 1;
                continue;
            }
            for l in compute_leaves(field, array)? {
                // Every leaf here is the Arrow writer's (runs are flat fields, handled above).
                if let Column::Arrow(w) = &mut group[leaf] {
                    w.write(&l)?;
                }
                leaf += 1;
            }
        }
        self.rows += batch.num_rows();
        Ok(())
    }

    fn flush_group(&mut self) -> Result<()> {
        let Some(group) = self.group.take() else {
            return Ok(());
        };
        let rows = std::mem::take(&mut self.rows);
        self.groups += 1;
        let mut g = self.file.next_row_group()?;
        for (i, c) in group.into_iter().enumerate() {
            match c {
                Column::Arrow(w) => w.close()?.append_to_row_group(&mut g)?,
                Column::Runs(r) => {
                    match r.finish(&self.descr.column(i), &self.props, rows, &mut self.spare)? {
                        Finished::Chunk(bytes, close) => g.append_column(&bytes, *close)?,
                        Finished::Arrow(w) => w.close()?.append_to_row_group(&mut g)?,
                    }
                }
            }
        }
        g.close()?;
        Ok(())
    }

    /// Write the last row group and the footer; the output back.
    pub fn into_inner(mut self) -> Result<W> {
        self.flush_group()?;
        self.file.into_inner()
    }
}

/// Whether a column of `data_type` may be encoded as runs under `props`: a flat text or
/// 32-bit integer column with dictionary encoding, no page statistics and no bloom filter.
fn runs_eligible(data_type: &DataType, descr: &ColumnDescPtr, props: &WriterProperties) -> bool {
    let path = descr.path();
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Int32
    ) && descr.max_rep_level() == 0
        && descr.max_def_level() <= 1
        && props.dictionary_enabled(path)
        && props.statistics_enabled(path) != EnabledStatistics::Page
        && props.bloom_filter_properties(path).is_none()
        && props.dictionary_page_encoding() == Encoding::PLAIN
        && matches!(
            props.compression(path),
            Compression::SNAPPY | Compression::UNCOMPRESSED
        )
}

/// A text or 32-bit integer column of the open row group, as runs: its dictionary in order of
/// first use, the dictionary index of each non-null value and, when the column is nullable,
/// which rows are null. The Arrow writer it replaces is kept, unused, for the fallback.
struct Runs {
    nullable: bool,
    /// Whether the column holds 32-bit integers, not texts.
    int: bool,
    /// PLAIN encoding of the dictionary: for texts each value's length (u32, little-endian),
    /// then its bytes; for integers each value's four bytes, little-endian.
    dict: Vec<u8>,
    /// Where each dictionary value's bytes start in `dict`, and their length.
    entries: Vec<(usize, usize)>,
    lookup: HashMap<Box<[u8]>, u32>,
    /// Integers: the dictionary index plus one of each value in `0..SMALL_INTS` (0 for none
    /// yet), so that a column whose value changes every row (an item number) costs an array
    /// read per row, not a hash; other values go to `ints`.
    small: Vec<u32>,
    ints: HashMap<i32, u32>,
    /// Integers: the last non-null value and its dictionary index.
    last_int: Option<(i32, u32)>,
    keys: Vec<u32>,
    /// One per row when nullable: 1 for a value, 0 for null.
    defs: Vec<u8>,
    nulls: u64,
    /// Bytes of the non-null values.
    unencoded: i64,
    /// The Arrow writer of this column, for the fallback (taken when used).
    fallback: Option<ArrowColumnWriter>,
}

enum Finished {
    Chunk(Bytes, Box<ColumnCloseResult>),
    Arrow(Box<ArrowColumnWriter>),
}

impl Runs {
    /// `buffers`: empty key and level buffers to fill (kept capacity from an earlier group).
    fn new(
        descr: ColumnDescPtr,
        int: bool,
        fallback: ArrowColumnWriter,
        (keys, defs): (Vec<u32>, Vec<u8>),
    ) -> Self {
        Runs {
            nullable: descr.max_def_level() == 1,
            int,
            dict: Vec::new(),
            entries: Vec::new(),
            lookup: HashMap::new(),
            small: Vec::new(),
            ints: HashMap::new(),
            last_int: None,
            keys,
            defs,
            nulls: 0,
            unencoded: 0,
            fallback: Some(fallback),
        }
    }

    fn entry(&self, k: u32) -> &[u8] {
        let (start, len) = self.entries[k as usize];
        &self.dict[start..start + len]
    }

    /// Add a column's rows. When the dictionary outgrows its page, the rows so far go to the
    /// Arrow writer, which is returned to take this column's place.
    fn push(
        &mut self,
        array: &ArrayRef,
        props: &WriterProperties,
    ) -> Result<Option<Box<ArrowColumnWriter>>> {
        match array.data_type() {
            DataType::Utf8 if !self.int => self.push_values(array.as_string::<i32>().iter())?,
            DataType::LargeUtf8 if !self.int => {
                self.push_values(array.as_string::<i64>().iter())?;
            }
            DataType::Utf8View if !self.int => self.push_views(array.as_string_view())?,
            DataType::Int32 if self.int => {
                self.push_ints(array.as_primitive::<arrow::datatypes::Int32Type>())?;
            }
            other => {
                return Err(ParquetError::General(format!(
                    "a {} column got an array of type {other}",
                    if self.int { "32-bit integer" } else { "text" }
                )))
            }
        }
        if self.dict.len() > props.dictionary_page_size_limit() {
            return self.hand_to_arrow().map(Some);
        }
        Ok(None)
    }

    fn push_values<'a>(&mut self, values: impl Iterator<Item = Option<&'a str>>) -> Result<()> {
        for v in values {
            match v {
                None => self.push_null()?,
                Some(v) => self.push_value(v.as_bytes()),
            }
        }
        Ok(())
    }

    /// String views: a view equal to the one before is the same value (the same length and
    /// bytes inline, or the same place in the same buffer), and costs no comparison of bytes.
    /// Rows come in runs of equal views (a request's columns repeated for each of its items),
    /// so a run is found first and its keys and levels written at once.
    fn push_views(&mut self, a: &arrow::array::StringViewArray) -> Result<()> {
        let views = a.views();
        if a.null_count() > 0 {
            let mut last_view = None;
            for (i, view) in views.iter().enumerate() {
                if a.is_null(i) {
                    self.push_null()?;
                    continue;
                }
                match self.keys.last() {
                    Some(k) if last_view == Some(*view) => {
                        let k = *k;
                        self.push_run(k, 1, i64::from(*view as u32));
                    }
                    _ => self.push_value(a.value(i).as_bytes()),
                }
                last_view = Some(*view);
            }
            return Ok(());
        }
        let mut i = 0;
        while i < views.len() {
            let view = views[i];
            let run = 1 + views[i + 1..].iter().take_while(|v| **v == view).count();
            self.push_value(a.value(i).as_bytes());
            if run > 1 {
                let k = *self.keys.last().expect("pushed above");
                self.push_run(k, run - 1, i64::from(view as u32));
            }
            i += run;
        }
        Ok(())
    }

    /// `n` more non-null rows of key `k`, each of `len` bytes.
    fn push_run(&mut self, k: u32, n: usize, len: i64) {
        if self.nullable {
            self.defs.resize(self.defs.len() + n, 1);
        }
        self.unencoded += len * n as i64;
        self.keys.resize(self.keys.len() + n, k);
    }

    fn push_ints(&mut self, a: &arrow::array::Int32Array) -> Result<()> {
        if a.null_count() == 0 {
            if self.nullable {
                self.defs.resize(self.defs.len() + a.len(), 1);
            }
            for run in a.values().chunk_by(|x, y| x == y) {
                self.push_int(run[0]);
                let k = *self.keys.last().expect("pushed above");
                self.keys.resize(self.keys.len() + run.len() - 1, k);
            }
            return Ok(());
        }
        for (i, v) in a.values().iter().enumerate() {
            if a.is_null(i) {
                self.push_null()?;
            } else {
                if self.nullable {
                    self.defs.push(1);
                }
                self.push_int(*v);
            }
        }
        Ok(())
    }

    /// A non-null integer's key (its definition level is the caller's).
    fn push_int(&mut self, v: i32) {
        let k = match self.last_int {
            Some((last, k)) if last == v => k,
            _ => {
                let k = self.intern_int(v);
                self.last_int = Some((v, k));
                k
            }
        };
        self.keys.push(k);
    }

    fn intern_int(&mut self, v: i32) -> u32 {
        let slot = usize::try_from(v).ok().filter(|s| *s < SMALL_INTS);
        let known = match slot {
            Some(s) => self.small.get(s).copied().filter(|k| *k > 0).map(|k| k - 1),
            None => self.ints.get(&v).copied(),
        };
        if let Some(k) = known {
            return k;
        }
        let k = u32::try_from(self.entries.len()).expect("a row group has fewer than 2^32 rows");
        self.entries.push((self.dict.len(), 4));
        self.dict.extend_from_slice(&v.to_le_bytes());
        match slot {
            Some(s) => {
                if self.small.len() <= s {
                    self.small.resize(s + 1, 0);
                }
                self.small[s] = k + 1;
            }
            None => {
                self.ints.insert(v, k);
            }
        }
        k
    }

    fn int_entry(&self, k: u32) -> i32 {
        let b = self.entry(k);
        i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    fn push_null(&mut self) -> Result<()> {
        if !self.nullable {
            return Err(ParquetError::General(
                "a null in a column that is not nullable".into(),
            ));
        }
        self.nulls += 1;
        self.defs.push(0);
        Ok(())
    }

    fn push_value(&mut self, v: &[u8]) {
        if self.nullable {
            self.defs.push(1);
        }
        self.unencoded += v.len() as i64;
        let k = match self.keys.last() {
            Some(k) if self.entry(*k) == v => *k,
            _ => self.intern(v),
        };
        self.keys.push(k);
    }

    fn intern(&mut self, v: &[u8]) -> u32 {
        if let Some(k) = self.lookup.get(v) {
            return *k;
        }
        let k = u32::try_from(self.entries.len()).expect("a row group has fewer than 2^32 rows");
        self.dict
            .extend_from_slice(&u32::try_from(v.len()).unwrap_or(u32::MAX).to_le_bytes());
        self.entries.push((self.dict.len(), v.len()));
        self.dict.extend_from_slice(v);
        self.lookup.insert(v.into(), k);
        k
    }

    /// The rows so far, as one array.
    fn values(&self) -> ArrayRef {
        let mut keys = self.keys.iter();
        if self.int {
            let values: arrow::array::Int32Array = if self.nullable {
                self.defs
                    .iter()
                    .map(|d| (*d == 1).then(|| self.int_entry(*keys.next().expect("a key"))))
                    .collect()
            } else {
                keys.map(|k| Some(self.int_entry(*k))).collect()
            };
            return Arc::new(values);
        }
        let values: StringArray = if self.nullable {
            self.defs
                .iter()
                .map(|d| {
                    (*d == 1).then(|| {
                        let k = *keys.next().expect("a key per value");
                        std::str::from_utf8(self.entry(k)).expect("pushed from a text array")
                    })
                })
                .collect()
        } else {
            keys.map(|k| Some(std::str::from_utf8(self.entry(*k)).expect("from text")))
                .collect()
        };
        Arc::new(values)
    }

    fn hand_to_arrow(&mut self) -> Result<Box<ArrowColumnWriter>> {
        let values = self.values();
        let data_type = if self.int {
            DataType::Int32
        } else {
            DataType::Utf8
        };
        let field = arrow::datatypes::Field::new("v", data_type, self.nullable);
        let mut w = self
            .fallback
            .take()
            .ok_or_else(|| ParquetError::General("text column fell back twice".into()))?;
        for l in compute_leaves(&field, &values)? {
            w.write(&l)?;
        }
        Ok(Box::new(w))
    }

    /// The column chunk of `rows` rows, or the Arrow writer with the rows when this encoding
    /// would not give the Arrow writer's statistics.
    fn finish(
        mut self: Box<Self>,
        descr: &ColumnDescPtr,
        props: &WriterProperties,
        rows: usize,
        spare: &mut Vec<(Vec<u32>, Vec<u8>)>,
    ) -> Result<Finished> {
        let path = descr.path();
        let stats = props.statistics_enabled(path) != EnabledStatistics::None;
        let bounds = if stats {
            match self.bounds(props) {
                Some(b) => Some(b),
                None => return self.hand_to_arrow().map(Finished::Arrow),
            }
        } else {
            None
        };
        let compress = props.compression(path) == Compression::SNAPPY;
        let mut out = TrackedWrite::new(Vec::new());
        let pages = self.write_pages(&mut out, props, rows, compress)?;
        let metadata = self.metadata(descr, props, rows, bounds, &pages)?;
        let (mut keys, mut defs) = (
            std::mem::take(&mut self.keys),
            std::mem::take(&mut self.defs),
        );
        keys.clear();
        defs.clear();
        spare.push((keys, defs));
        let close = ColumnCloseResult {
            bytes_written: pages.compressed as u64,
            rows_written: rows as u64,
            metadata,
            bloom_filter: None,
            column_index: None,
            offset_index: pages.offsets.map(OffsetIndexBuilder::build),
        };
        Ok(Finished::Chunk(
            Bytes::from(out.into_inner()?),
            Box::new(close),
        ))
    }

    /// The smallest and the largest value of the chunk; `None` when a text bound is longer
    /// than the statistics keep (the Arrow writer then truncates it, so this encoding
    /// would not give its bytes).
    fn bounds(&self, props: &WriterProperties) -> Option<Bounds> {
        if self.int {
            let (mut imin, mut imax): (Option<i32>, Option<i32>) = (None, None);
            for k in 0..self.entries.len() as u32 {
                let v = self.int_entry(k);
                imin = Some(imin.map_or(v, |m| m.min(v)));
                imax = Some(imax.map_or(v, |m| m.max(v)));
            }
            return Some(Bounds::Int(imin, imax));
        }
        let (mut min, mut max): (Option<&[u8]>, Option<&[u8]>) = (None, None);
        for k in 0..self.entries.len() as u32 {
            let v = self.entry(k);
            if min.is_none_or(|m| v < m) {
                min = Some(v);
            }
            if max.is_none_or(|m| v > m) {
                max = Some(v);
            }
        }
        let limit = props.statistics_truncate_length().unwrap_or(usize::MAX);
        if min.is_some_and(|m| m.len() > limit) || max.is_some_and(|m| m.len() > limit) {
            return None;
        }
        Some(Bounds::Bytes(
            min.map(ByteArray::from),
            max.map(ByteArray::from),
        ))
    }

    /// Write the dictionary page, then the data pages of at most the configured row count
    /// each, to `out`, Snappy-compressed when `compress`.
    fn write_pages(
        &mut self,
        out: &mut TrackedWrite<Vec<u8>>,
        props: &WriterProperties,
        rows: usize,
        compress: bool,
    ) -> Result<Pages> {
        let squeeze = |raw: Vec<u8>| -> Result<(Bytes, usize)> {
            let n = raw.len();
            if !compress {
                return Ok((Bytes::from(raw), n));
            }
            let c = snap::raw::Encoder::new()
                .compress_vec(&raw)
                .map_err(|e| ParquetError::External(Box::new(e)))?;
            Ok((Bytes::from(c), n))
        };
        let mut p = Pages {
            offsets: (!props.offset_index_disabled()).then(OffsetIndexBuilder::new),
            compressed: 0,
            uncompressed: 0,
            data_pages: 0,
            data_page_offset: None,
        };
        let mut pages = SerializedPageWriter::new(out);
        let (buf, n) = squeeze(std::mem::take(&mut self.dict))?;
        let spec = pages.write_page(CompressedPage::new(
            Page::DictionaryPage {
                buf,
                num_values: self.entries.len() as u32,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            },
            n,
        ))?;
        p.compressed += spec.compressed_size as i64;
        p.uncompressed += spec.uncompressed_size as i64;
        let width = bit_width(self.entries.len().saturating_sub(1) as u64);
        let per_page = props.data_page_row_count_limit().max(1);
        let (mut row, mut key) = (0, 0);
        while row < rows {
            let end = (row + per_page).min(rows);
            let mut raw = Vec::new();
            let values = if self.nullable {
                let defs = &self.defs[row..end];
                let mut levels = Vec::new();
                rle_runs(defs, 1, &mut levels);
                raw.extend_from_slice(&(levels.len() as u32).to_le_bytes());
                raw.extend_from_slice(&levels);
                defs.iter().filter(|d| **d == 1).count()
            } else {
                end - row
            };
            let keys = &self.keys[key..key + values];
            raw.push(width);
            rle_runs(keys, width, &mut raw);
            let page_bytes: Option<i64> = (!self.int).then(|| {
                keys.chunk_by(|a, b| a == b)
                    .map(|run| self.entries[run[0] as usize].1 as i64 * run.len() as i64)
                    .sum()
            });
            let (buf, n) = squeeze(raw)?;
            let spec = pages.write_page(CompressedPage::new(
                Page::DataPage {
                    buf,
                    num_values: (end - row) as u32,
                    encoding: Encoding::RLE_DICTIONARY,
                    def_level_encoding: Encoding::RLE,
                    rep_level_encoding: Encoding::RLE,
                    statistics: None,
                },
                n,
            ))?;
            p.data_page_offset.get_or_insert(spec.offset as i64);
            p.compressed += spec.compressed_size as i64;
            p.uncompressed += spec.uncompressed_size as i64;
            p.data_pages += 1;
            if let Some(o) = p.offsets.as_mut() {
                o.append_offset_and_size(spec.offset as i64, spec.compressed_size as i32);
                o.append_row_count((end - row) as i64);
                o.append_unencoded_byte_array_data_bytes(page_bytes);
            }
            row = end;
            key += values;
        }
        pages.close()?;
        Ok(p)
    }

    /// The chunk's metadata: sizes and offsets of its `pages`, and with `bounds` its
    /// statistics.
    fn metadata(
        &self,
        descr: &ColumnDescPtr,
        props: &WriterProperties,
        rows: usize,
        bounds: Option<Bounds>,
        pages: &Pages,
    ) -> Result<ColumnChunkMetaData> {
        let mut encoding_stats = vec![PageEncodingStats {
            page_type: PageType::DICTIONARY_PAGE,
            encoding: Encoding::PLAIN,
            count: 1,
        }];
        if pages.data_pages > 0 {
            encoding_stats.push(PageEncodingStats {
                page_type: PageType::DATA_PAGE,
                encoding: Encoding::RLE_DICTIONARY,
                count: pages.data_pages,
            });
        }
        let mut meta = ColumnChunkMetaData::builder(descr.clone())
            .set_compression(props.compression(descr.path()))
            .set_encodings_mask(EncodingMask::new_from_encodings(
                [Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY].iter(),
            ))
            .set_page_encoding_stats(encoding_stats)
            .set_total_compressed_size(pages.compressed)
            .set_total_uncompressed_size(pages.uncompressed)
            .set_num_values(rows as i64)
            .set_data_page_offset(pages.data_page_offset.unwrap_or(0))
            .set_dictionary_page_offset(Some(0));
        if let Some(bounds) = bounds {
            let signed = descr.sort_order().is_signed();
            let (s, unencoded) = match bounds {
                Bounds::Int(imin, imax) => {
                    let s = ValueStatistics::<i32>::new(imin, imax, None, Some(self.nulls), false)
                        .with_backwards_compatible_min_max(signed);
                    (Statistics::Int32(s), None)
                }
                Bounds::Bytes(min, max) => {
                    let s =
                        ValueStatistics::<ByteArray>::new(min, max, None, Some(self.nulls), false)
                            .with_backwards_compatible_min_max(signed);
                    (Statistics::ByteArray(s), Some(self.unencoded))
                }
            };
            meta = meta
                .set_statistics(s)
                .set_unencoded_byte_array_data_bytes(unencoded)
                .set_definition_level_histogram((descr.max_def_level() > 0).then(|| {
                    LevelHistogram::from(vec![self.nulls as i64, (rows as u64 - self.nulls) as i64])
                }));
        }
        meta.build()
    }
}

/// The smallest and the largest value of a column chunk, for its statistics.
enum Bounds {
    Int(Option<i32>, Option<i32>),
    Bytes(Option<ByteArray>, Option<ByteArray>),
}

/// What writing a column chunk's pages gave: its offset index, its sizes, its data pages
/// and where the first of them starts.
struct Pages {
    offsets: Option<OffsetIndexBuilder>,
    compressed: i64,
    uncompressed: i64,
    data_pages: i32,
    data_page_offset: Option<i64>,
}

/// Integers below this are looked up in an array ([`Runs::small`]).
const SMALL_INTS: usize = 1 << 12;

/// Bits needed for values up to `max`.
fn bit_width(max: u64) -> u8 {
    (64 - max.leading_zeros()) as u8
}

/// The RLE / bit-packing hybrid encoding of `values` (each below `2^width`): a run of eight or
/// more equal values is an RLE run (its length shifted left by one, as an unsigned LEB128
/// varint, then the value in `ceil(width / 8)` bytes, little-endian); the values between such
/// runs are bit-packed in groups of eight (a header of the group count shifted left by one,
/// plus one; then each group in `width` bytes, least significant bit first), the last group
/// padded with zeros (a reader takes the page's value count). Values that change often cost a
/// few bits each, as in the Arrow writer's encoder, not a run header each.
fn rle_runs<T: Copy + PartialEq + Into<u64>>(values: &[T], width: u8, out: &mut Vec<u8>) {
    /// Groups per bit-packed run: its header stays one byte.
    const MAX_GROUPS: usize = 63;
    let varint = |mut h: u64, out: &mut Vec<u8>| {
        while h >= 0x80 {
            out.push((h as u8) | 0x80);
            h >>= 7;
        }
        out.push(h as u8);
    };
    let rle = |value: u64, n: u64, out: &mut Vec<u8>| {
        varint(n << 1, out);
        out.extend_from_slice(&value.to_le_bytes()[..usize::from(width).div_ceil(8)]);
    };
    let packed = |literals: &mut Vec<u64>, out: &mut Vec<u8>| {
        for chunk in literals.chunks(8 * MAX_GROUPS) {
            let groups = chunk.len().div_ceil(8);
            varint(((groups as u64) << 1) | 1, out);
            let (mut acc, mut bits) = (0u128, 0u32);
            for i in 0..groups * 8 {
                acc |= u128::from(chunk.get(i).copied().unwrap_or(0)) << bits;
                bits += u32::from(width);
                while bits >= 8 {
                    out.push(acc as u8);
                    acc >>= 8;
                    bits -= 8;
                }
            }
        }
        literals.clear();
    };
    // Runs of equal values, then each either RLE or literals: literals are flushed only in
    // whole groups of eight, so a long run first tops the literals up to a group.
    let mut literals: Vec<u64> = Vec::new();
    let mut take_run = |x: u64, mut n: u64, out: &mut Vec<u8>| {
        let fill = ((8 - literals.len() % 8) % 8) as u64;
        if n >= fill + 8 {
            literals.extend(std::iter::repeat_n(x, fill as usize));
            n -= fill;
            if !literals.is_empty() {
                packed(&mut literals, out);
            }
            rle(x, n, out);
        } else {
            literals.extend(std::iter::repeat_n(x, n as usize));
        }
    };
    for run in values.chunk_by(|a, b| a == b) {
        take_run(run[0].into(), run.len() as u64, out);
    }
    if !literals.is_empty() {
        packed(&mut literals, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringViewArray};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use proptest::prelude::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("n", DataType::Int32, true),
            Field::new("maybe", DataType::Utf8, true),
        ]))
    }

    /// Batches of `rows` cut at `cuts`, the text columns as plain strings or string views.
    fn batches(
        rows: &[(String, Option<i32>, Option<String>)],
        cuts: &[usize],
        views: bool,
    ) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        let mut start = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|c| c % (rows.len() + 1)).collect();
        ends.push(rows.len());
        ends.sort_unstable();
        for end in ends {
            let part = &rows[start..end.max(start)];
            let key: Vec<&str> = part.iter().map(|r| r.0.as_str()).collect();
            let maybe: Vec<Option<&str>> = part.iter().map(|r| r.2.as_deref()).collect();
            let (key, maybe): (ArrayRef, ArrayRef) = if views {
                (
                    Arc::new(StringViewArray::from(key)),
                    Arc::new(StringViewArray::from(maybe)),
                )
            } else {
                (
                    Arc::new(StringArray::from(key)),
                    Arc::new(StringArray::from(maybe)),
                )
            };
            let n: ArrayRef = Arc::new(Int32Array::from(
                part.iter().map(|r| r.1).collect::<Vec<_>>(),
            ));
            let fields: Vec<Field> = vec![
                Field::new("key", key.data_type().clone(), false),
                Field::new("n", DataType::Int32, true),
                Field::new("maybe", maybe.data_type().clone(), true),
            ];
            out.push(
                RecordBatch::try_new(Arc::new(Schema::new(fields)), vec![key, n, maybe]).unwrap(),
            );
            start = end.max(start);
        }
        out
    }

    fn with_table_writer(b: &[RecordBatch], props: WriterProperties) -> Vec<u8> {
        let mut w = TableWriter::try_new(Vec::new(), schema(), props).unwrap();
        for x in b {
            w.write(x).unwrap();
        }
        w.into_inner().unwrap()
    }

    fn with_arrow_writer(b: &[RecordBatch], props: WriterProperties) -> Vec<u8> {
        let mut w = ArrowWriter::try_new(Vec::new(), schema(), Some(props)).unwrap();
        for x in b {
            let x = arrow::compute::cast(
                &arrow::array::StructArray::from(x.clone()),
                &DataType::Struct(schema().fields().clone()),
            )
            .unwrap();
            w.write(&RecordBatch::from(x.as_struct().clone())).unwrap();
        }
        w.into_inner().unwrap()
    }

    fn read(bytes: &[u8]) -> RecordBatch {
        let r = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes.to_vec()))
            .unwrap()
            .build()
            .unwrap();
        let b: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
        arrow::compute::concat_batches(&schema(), &b).unwrap()
    }

    /// What a reader learns from a column chunk's metadata, offsets and page layout aside.
    fn chunk_facts(bytes: &[u8]) -> Vec<String> {
        let r = SerializedFileReader::new(Bytes::from(bytes.to_vec())).unwrap();
        let mut facts = vec![format!(
            "{:?}",
            r.metadata().file_metadata().key_value_metadata()
        )];
        for g in r.metadata().row_groups() {
            facts.push(format!("rows {}", g.num_rows()));
            for c in g.columns() {
                facts.push(format!(
                    "{} {:?} {} {:?} {:?} {:?} {:?}",
                    c.column_path(),
                    c.compression(),
                    c.num_values(),
                    c.statistics(),
                    c.unencoded_byte_array_data_bytes(),
                    c.definition_level_histogram(),
                    c.repetition_level_histogram(),
                ));
            }
        }
        facts
    }

    fn props(
        group: usize,
        page_rows: usize,
        dict_bytes: usize,
        stats: EnabledStatistics,
        truncate: Option<usize>,
    ) -> WriterProperties {
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(group))
            .set_data_page_row_count_limit(page_rows)
            .set_dictionary_page_size_limit(dict_bytes)
            .set_statistics_enabled(stats)
            .set_statistics_truncate_length(truncate)
            .build()
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("model-a".to_string()),
            Just("model-b, a name longer than twelve bytes".to_string()),
            Just("ünïcödé ✓".to_string()),
            "[a-c]{0,3}",
            // Enough different texts for dictionary indices of more than eight bits.
            "[a-z]{1,3}",
        ]
    }

    fn row() -> impl Strategy<Value = (String, Option<i32>, Option<String>)> {
        (
            text(),
            proptest::option::of(prop_oneof![
                0..5i32,
                4090..4100i32,
                Just(i32::MIN),
                Just(i32::MAX),
                -70_000..70_000i32
            ]),
            proptest::option::of(text()),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// The table read back and the chunks' statistics are those of the Arrow writer, for
        /// runs and for values that change every row, nulls, row groups and pages of any
        /// size, a dictionary too large for its page and statistics too long to keep.
        #[test]
        fn same_table_and_statistics_as_the_arrow_writer(
            runs in proptest::collection::vec((row(), 1..40usize), 0..30),
            cuts in proptest::collection::vec(0..2000usize, 0..4),
            views in any::<bool>(),
            group in 1..600usize,
            page_rows in 1..100usize,
            dict_bytes in prop_oneof![Just(1usize << 20), 1..60usize],
            stats in prop_oneof![Just(EnabledStatistics::None), Just(EnabledStatistics::Chunk)],
            truncate in prop_oneof![Just(None), Just(Some(64usize)), Just(Some(3usize))],
        ) {
            let rows: Vec<_> = runs
                .iter()
                .flat_map(|(r, n)| std::iter::repeat_n(r.clone(), *n))
                .collect();
            let b = batches(&rows, &cuts, views);
            let p = || props(group, page_rows, dict_bytes, stats, truncate);
            let ours = with_table_writer(&b, p());
            let theirs = with_arrow_writer(&b, p());
            prop_assert_eq!(read(&ours), read(&theirs));
            prop_assert_eq!(chunk_facts(&ours), chunk_facts(&theirs));
            prop_assert_eq!(&ours, &with_table_writer(&b, p()), "same rows, same bytes");
        }
    }

    #[test]
    fn text_columns_in_runs_are_dictionary_pages_of_rle_runs() {
        let rows: Vec<_> = (0..5000)
            .map(|i| {
                (
                    format!("model-{}", i / 1000),
                    Some(i),
                    (i % 3 > 0).then(|| "x".to_string()),
                )
            })
            .collect();
        let p = || props(1 << 20, 20_000, 1 << 20, EnabledStatistics::Chunk, Some(64));
        let ours = with_table_writer(&batches(&rows, &[1234], false), p());
        let r = SerializedFileReader::new(Bytes::from(ours.clone())).unwrap();
        let key = r.metadata().row_group(0).column(0);
        assert_eq!(key.dictionary_page_offset(), Some(4));
        let encodings: Vec<Encoding> = key.encodings().collect();
        assert_eq!(
            encodings,
            [Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY]
        );
        // Five runs of 1,000 rows: a few bytes, not a byte per row.
        assert!(key.compressed_size() < 200, "{}", key.compressed_size());
        assert_eq!(read(&ours).num_rows(), 5000);
    }

    #[test]
    fn integer_columns_in_runs_are_dictionary_pages_of_rle_runs() {
        // `n` in runs of 500 over five values, then changing every row (values past the
        // array of small integers and negative ones too), nulls between.
        let rows: Vec<_> = (0..6000)
            .map(|i: i32| {
                let n = if i < 2500 { i / 500 } else { (i - 4000) * 7 };
                ("k".to_string(), (i % 11 > 0).then_some(n), None)
            })
            .collect();
        let p = || props(1 << 20, 20_000, 1 << 20, EnabledStatistics::Chunk, Some(64));
        let b = batches(&rows, &[777], false);
        let ours = with_table_writer(&b, p());
        assert_eq!(read(&ours), read(&with_arrow_writer(&b, p())));
        assert_eq!(chunk_facts(&ours), chunk_facts(&with_arrow_writer(&b, p())));
        let r = SerializedFileReader::new(Bytes::from(ours)).unwrap();
        let n = r.metadata().row_group(0).column(1);
        let encodings: Vec<Encoding> = n.encodings().collect();
        assert_eq!(
            encodings,
            [Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY]
        );
        // The first 2,500 rows alone: five runs, a few bytes.
        let head = batches(&rows[..2500], &[], false);
        let small = with_table_writer(&head, p());
        let r = SerializedFileReader::new(Bytes::from(small)).unwrap();
        let size = r.metadata().row_group(0).column(1).compressed_size();
        assert!(size < 300, "{size}");
    }

    #[test]
    fn wide_dictionary_indices_bit_packed_and_in_runs() {
        // 3,000 texts (12-bit indices): changing every row (bit-packed), then in runs of 9
        // (RLE after the packed groups are topped up), nulls between.
        let rows: Vec<_> = (0..6000)
            .map(|i: i32| {
                let k = if i < 3000 { i } else { (i - 3000) / 9 };
                (
                    format!("text {k}"),
                    Some(i),
                    (i % 7 > 0).then(|| format!("{}", i / 13)),
                )
            })
            .collect();
        for stats in [EnabledStatistics::None, EnabledStatistics::Chunk] {
            let p = || props(1 << 20, 20_000, 1 << 20, stats, Some(64));
            let b = batches(&rows, &[1000, 4321], true);
            let ours = with_table_writer(&b, p());
            assert_eq!(read(&ours), read(&with_arrow_writer(&b, p())));
            assert_eq!(chunk_facts(&ours), chunk_facts(&with_arrow_writer(&b, p())));
        }
    }

    /// The error of writing one batch of `fields` and `columns` to a writer of [`schema`].
    fn refused(fields: Vec<Field>, columns: Vec<ArrayRef>) -> String {
        let b = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let p = props(100, 100, 100, EnabledStatistics::Chunk, None);
        let mut w = TableWriter::try_new(Vec::new(), schema(), p).unwrap();
        w.write(&b).unwrap_err().to_string()
    }

    #[test]
    fn an_array_of_another_type_is_an_error() {
        let e = refused(
            vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("n", DataType::Utf8, true),
                Field::new("maybe", DataType::Int32, true),
            ],
            vec![
                Arc::new(StringArray::from(vec!["a"])),
                Arc::new(StringArray::from(vec!["1"])),
                Arc::new(Int32Array::from(vec![1])),
            ],
        );
        assert!(e.contains("got an array of type"), "{e}");
    }

    #[test]
    fn a_null_in_a_required_text_column_is_an_error() {
        let e = refused(
            vec![
                Field::new("key", DataType::Utf8, true),
                Field::new("n", DataType::Int32, true),
                Field::new("maybe", DataType::Utf8, true),
            ],
            vec![
                Arc::new(StringArray::from(vec![Some("a"), None])),
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            ],
        );
        assert!(e.contains("not nullable"), "{e}");
    }
}
