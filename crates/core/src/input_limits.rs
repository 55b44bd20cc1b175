//! Size limits on what one input file can make protospread hold in memory, enforced while the
//! file is read, before the memory is spent: a cell, a record (a CSV row or a JSON line), and,
//! for Parquet, the footer, the number of row groups and a page. Every reader of an input
//! (stored answers, human data, sweep results) applies them from here, so the limits and
//! their messages are the same everywhere (docs/reliability.md, "Size limits").
//!
//! Streaming readers hold one record (or one Parquet page per column) at a time, so these
//! bounds, not the size of the file, are what an input can cost.

use std::fmt;
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::Path;

/// Largest cell, in bytes (of a CSV field after unquoting, a JSON string value, a Parquet text
/// value). The largest cell a real input holds is a model's reply, and `administer` stores at
/// most a 16 MiB response body, so no reply it wrote can exceed this.
pub const MAX_CELL_BYTES: usize = 16 << 20;

/// Largest record, in bytes: a CSV row (its fields after unquoting) or a JSON line, also a
/// whole lm-eval `results_*.json` document. Room for several cells of
/// [`MAX_CELL_BYTES`] with a harness's extension columns beside them.
pub const MAX_RECORD_BYTES: usize = 64 << 20;

/// Largest Parquet footer (the file's metadata), in bytes. It is decoded whole, into about
/// five times its size; 10,000 row groups of 20 columns take about 10 MiB.
pub const MAX_PARQUET_FOOTER_BYTES: usize = 16 << 20;

/// Most row groups a Parquet file may have. Writers put 64 Ki to 1 Mi rows into a row group
/// (protospread and pyarrow 1 Mi), so 10,000 row groups hold far more records than any
/// study; files of many tiny row groups (one per appended batch) cost memory and time per
/// row group and should be rewritten.
pub const MAX_PARQUET_ROW_GROUPS: usize = 10_000;

/// Largest Parquet page, compressed or not, in bytes. A page is read and decoded whole; writers
/// aim at 1 MiB pages (protospread, pyarrow, parquet-rs), and a page must at least hold one
/// cell of [`MAX_CELL_BYTES`].
pub const MAX_PARQUET_PAGE_BYTES: usize = 64 << 20;

/// What exceeded its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limited {
    /// One cell ([`MAX_CELL_BYTES`]).
    Cell,
    /// One record: a CSV row, a JSON line or document ([`MAX_RECORD_BYTES`]).
    Record,
    /// A Parquet footer ([`MAX_PARQUET_FOOTER_BYTES`]).
    ParquetFooter,
    /// The row groups of a Parquet file ([`MAX_PARQUET_ROW_GROUPS`]).
    ParquetRowGroups,
    /// One Parquet page ([`MAX_PARQUET_PAGE_BYTES`]).
    ParquetPage,
}

impl Limited {
    /// The limit.
    pub fn limit(self) -> u64 {
        (match self {
            Limited::Cell => MAX_CELL_BYTES,
            Limited::Record => MAX_RECORD_BYTES,
            Limited::ParquetFooter => MAX_PARQUET_FOOTER_BYTES,
            Limited::ParquetRowGroups => MAX_PARQUET_ROW_GROUPS,
            Limited::ParquetPage => MAX_PARQUET_PAGE_BYTES,
        }) as u64
    }
}

/// Where in the file the limit was exceeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The file as a whole (a Parquet footer, the row-group count, a JSON document).
    File,
    /// A record of a text file.
    Record {
        /// 0-based record of a CSV file (the header is record 0) or 1-based line of a JSON
        /// Lines file.
        record: u64,
        /// 1-based line where the record starts.
        line: u64,
        /// 0-based field of a CSV cell; `None` for the record as a whole.
        field: Option<usize>,
    },
    /// A page of a Parquet column chunk.
    Page {
        /// 0-based row group.
        row_group: usize,
        /// 0-based leaf column.
        column: usize,
        /// 1-based row of the file where the page starts.
        first_row: u64,
    },
}

/// An input part larger than its limit. Its message says what, how large, the limit and what
/// to do; the reader adds the file, row and column (from [`Self::place`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    /// What exceeded its limit.
    pub what: Limited,
    /// The size seen (bytes, or row groups): the whole size where it is known before reading
    /// (a footer, a page, the row groups), else the bytes read when the limit was passed.
    pub size: u64,
    /// Whether [`Self::size`] is the whole size (else: at least).
    pub exact: bool,
    /// Where.
    pub place: Place,
}

/// `n` bytes for a message: exact, with the MiB when that is a whole number.
fn bytes(n: u64) -> String {
    let digits = n.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB ({grouped} bytes)", n >> 20)
    } else {
        format!("{grouped} bytes")
    }
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = self.what.limit();
        let size = if self.exact {
            format!(" of {}", bytes(self.size))
        } else {
            String::new()
        };
        match self.what {
            Limited::Cell => write!(
                f,
                "cell{size} over the limit of {} per cell: protospread holds a cell in \
                 memory whole and reads none longer; shorten the cell or leave it out of the file",
                bytes(limit)
            ),
            Limited::Record => write!(
                f,
                "record{size} over the limit of {} per record (a CSV row, a JSON line or \
                 document): protospread holds a record in memory whole and reads none longer; \
                 split or shorten it",
                bytes(limit)
            ),
            Limited::ParquetFooter => write!(
                f,
                "Parquet footer (file metadata){size} over the limit of {}: it is decoded \
                 whole; rewrite the file with fewer row groups or columns (pyarrow: \
                 pq.write_table(table, path, row_group_size=1_000_000))",
                bytes(limit)
            ),
            Limited::ParquetRowGroups => write!(
                f,
                "{} row groups, over the limit of {limit}: rewrite the file with larger row \
                 groups (pyarrow: pq.write_table(pq.read_table(path), new_path, \
                 row_group_size=1_000_000))",
                self.size
            ),
            Limited::ParquetPage => write!(
                f,
                "Parquet page{size} over the limit of {} per page: a page is read and \
                 decoded whole; rewrite the file with smaller pages (pyarrow: \
                 data_page_size=1_048_576) or shorter cells (at most {} each)",
                bytes(limit),
                bytes(MAX_CELL_BYTES as u64)
            ),
        }
    }
}

impl std::error::Error for TooLarge {}

impl TooLarge {
    /// The [`TooLarge`] inside an I/O error returned by [`CsvLimiter`], if that is what it is.
    pub fn in_io(e: &std::io::Error) -> Option<&TooLarge> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<TooLarge>())
    }

    /// `Err` when a cell of `len` bytes is over [`MAX_CELL_BYTES`].
    pub fn check_cell(len: usize, place: Place) -> Result<(), TooLarge> {
        if len > MAX_CELL_BYTES {
            return Err(TooLarge {
                what: Limited::Cell,
                size: len as u64,
                exact: true,
                place,
            });
        }
        Ok(())
    }
}

/// A reader of CSV bytes that passes them through unchanged and fails, with an I/O error
/// holding a [`TooLarge`] (see [`TooLarge::in_io`]), as soon as a field exceeds
/// [`MAX_CELL_BYTES`] or a record [`MAX_RECORD_BYTES`]. Give it to a `csv::Reader` with the
/// default dialect (comma, double quote, quotes escaped by doubling): it parses the bytes
/// with the same parser, so a cell is measured as the `csv` crate reads it, after unquoting,
/// and the reader never buffers more than a limit and one read.
pub struct CsvLimiter<R> {
    inner: R,
    parser: csv_core::Reader,
    scratch: Box<[u8]>,
    /// 0-based record being read (the header is record 0).
    record: u64,
    field: usize,
    record_line: u64,
    field_bytes: usize,
    record_bytes: usize,
    failed: Option<TooLarge>,
}

impl<R: Read> CsvLimiter<R> {
    /// Limit the CSV read from `inner`.
    pub fn new(inner: R) -> Self {
        CsvLimiter {
            inner,
            parser: csv_core::Reader::new(),
            scratch: vec![0; 64 * 1024].into_boxed_slice(),
            record: 0,
            field: 0,
            record_line: 1,
            field_bytes: 0,
            record_bytes: 0,
            failed: None,
        }
    }

    /// The reader given to [`Self::new`], e.g. to read the rest of the file after the CSV
    /// reader stopped.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    fn measure(&mut self, mut input: &[u8]) -> Result<(), TooLarge> {
        loop {
            if self.field == 0 && self.record_bytes == 0 {
                self.record_line = self.parser.line();
            }
            let (res, nin, nout) = self.parser.read_field(input, &mut self.scratch);
            input = &input[nin..];
            self.field_bytes += nout;
            self.record_bytes += nout;
            let over = |what: Limited, size: usize| {
                (size as u64 > what.limit()).then_some(TooLarge {
                    what,
                    size: size as u64,
                    exact: false,
                    place: Place::Record {
                        record: self.record,
                        line: self.record_line,
                        field: Some(self.field),
                    },
                })
            };
            let cell = over(Limited::Cell, self.field_bytes);
            if let Some(t) = cell.or_else(|| over(Limited::Record, self.record_bytes)) {
                return Err(t);
            }
            match res {
                csv_core::ReadFieldResult::InputEmpty | csv_core::ReadFieldResult::End => {
                    return Ok(())
                }
                csv_core::ReadFieldResult::OutputFull => {}
                csv_core::ReadFieldResult::Field { record_end } => {
                    self.field_bytes = 0;
                    self.field += 1;
                    if record_end {
                        self.field = 0;
                        self.record += 1;
                        self.record_bytes = 0;
                    }
                }
            }
        }
    }
}

impl<R: Read> Read for CsvLimiter<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(e) = &self.failed {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                e.clone(),
            ));
        }
        let n = self.inner.read(buf)?;
        if let Err(e) = self.measure(&buf[..n]) {
            self.failed = Some(e.clone());
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        }
        Ok(n)
    }
}

/// What [`read_line_limited`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// A line (in the buffer, with its `\n` if it had one).
    Read,
    /// The end of the input: nothing was read.
    End,
    /// The line is longer than the limit: the buffer holds its first `limit + 1` bytes, and the
    /// rest of the line is not read.
    TooLong,
}

/// Read one line (up to and including `\n`, or to the end of the input) into `buf` (cleared
/// first), holding at most `limit` bytes of it besides its `\n` (and `\r`).
pub fn read_line_limited(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    buf.clear();
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(if buf.is_empty() {
                Line::End
            } else {
                Line::Read
            });
        }
        let (take, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        // The room left, counting a final `\r\n` as not part of the line.
        let room = limit + 2 - buf.len().min(limit + 2);
        let take_now = take.min(room);
        buf.extend_from_slice(&avail[..take_now]);
        r.consume(take_now);
        let content =
            buf.len() - usize::from(buf.ends_with(b"\n")) - usize::from(buf.ends_with(b"\r\n"));
        if content > limit {
            buf.truncate(limit + 1);
            return Ok(Line::TooLong);
        }
        if done && take_now == take {
            return Ok(Line::Read);
        }
    }
}

/// Read a whole file of at most `limit` bytes (a JSON document), without reading more than
/// `limit + 1` bytes of a larger one. `Ok(Err(too_large))` for a larger file.
pub fn read_limited(path: &Path, limit: usize) -> std::io::Result<Result<Vec<u8>, TooLarge>> {
    let f = fs_err::File::open(path)?;
    let mut bytes = Vec::new();
    f.take(limit as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > limit {
        return Ok(Err(TooLarge {
            what: Limited::Record,
            size: bytes.len() as u64,
            exact: false,
            place: Place::File,
        }));
    }
    Ok(Ok(bytes))
}

/// The compact Thrift encoding of Parquet's footer and page headers, read just far enough to
/// find a list's length or a page's sizes, from a seekable reader, skipping binary values
/// without reading them into memory.
struct Thrift<'a> {
    r: &'a mut std::io::BufReader<fs_err::File>,
    /// Bytes the structure may still take (the end of the footer or column chunk).
    left: u64,
}

/// Compact protocol type ids.
const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;

/// Nesting deeper than Parquet's own structures is malformed (and would recurse without bound).
const MAX_DEPTH: usize = 32;

fn malformed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "malformed Thrift structure",
    )
}

impl Thrift<'_> {
    fn byte(&mut self) -> std::io::Result<u8> {
        if self.left == 0 {
            return Err(malformed());
        }
        let mut b = [0u8];
        self.r.read_exact(&mut b)?;
        self.left -= 1;
        Ok(b[0])
    }

    fn skip(&mut self, n: u64) -> std::io::Result<()> {
        if n > self.left {
            return Err(malformed());
        }
        self.r.seek_relative(n as i64)?;
        self.left -= n;
        Ok(())
    }

    fn varint(&mut self) -> std::io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(malformed())
    }

    fn zigzag(&mut self) -> std::io::Result<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The next field's id and type, `None` at the end of the struct.
    fn field(&mut self, last: &mut i64) -> std::io::Result<Option<(i64, u8)>> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let (delta, ty) = (b >> 4, b & 0x0f);
        *last = if delta == 0 {
            self.zigzag()?
        } else {
            *last + i64::from(delta)
        };
        Ok(Some((*last, ty)))
    }

    /// A list or set header: element count and type.
    fn list(&mut self) -> std::io::Result<(u64, u8)> {
        let b = self.byte()?;
        let n = match b >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        Ok((n, b & 0x0f))
    }

    fn int(&mut self, ty: u8) -> std::io::Result<i64> {
        match ty {
            T_I16 | T_I32 | T_I64 => self.zigzag(),
            _ => Err(malformed()),
        }
    }

    fn skip_value(&mut self, ty: u8, depth: usize) -> std::io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(malformed());
        }
        match ty {
            T_TRUE | T_FALSE => Ok(()),
            T_BYTE => self.byte().map(drop),
            T_I16 | T_I32 | T_I64 => self.varint().map(drop),
            T_DOUBLE => self.skip(8),
            T_BINARY => {
                let n = self.varint()?;
                self.skip(n)
            }
            T_LIST | T_SET => {
                let (n, elem) = self.list()?;
                for _ in 0..n {
                    if matches!(elem, T_TRUE | T_FALSE) {
                        self.byte()?;
                    } else {
                        self.skip_value(elem, depth + 1)?;
                    }
                }
                Ok(())
            }
            T_MAP => {
                let n = self.varint()?;
                if n > 0 {
                    let kv = self.byte()?;
                    for _ in 0..n {
                        self.skip_value(kv >> 4, depth + 1)?;
                        self.skip_value(kv & 0x0f, depth + 1)?;
                    }
                }
                Ok(())
            }
            T_STRUCT => {
                let mut last = 0;
                while let Some((_, t)) = self.field(&mut last)? {
                    self.skip_value(t, depth + 1)?;
                }
                Ok(())
            }
            _ => Err(malformed()),
        }
    }

    /// The first i32 field numbered `id` of a struct (skipping the rest of it).
    fn struct_int(&mut self, id: i64) -> std::io::Result<Option<i64>> {
        let mut last = 0;
        let mut found = None;
        while let Some((f, t)) = self.field(&mut last)? {
            if f == id && found.is_none() && matches!(t, T_I16 | T_I32 | T_I64) {
                found = Some(self.int(t)?);
            } else {
                self.skip_value(t, 1)?;
            }
        }
        Ok(found)
    }
}

/// Check a Parquet file's footer against [`MAX_PARQUET_ROW_GROUPS`] and
/// [`MAX_PARQUET_FOOTER_BYTES`] from its tail, before the footer is decoded: the footer's
/// length is in the last 8 bytes, and the row groups are counted from the header of their
/// list, reading only the schema before it. A file too short or malformed to tell passes:
/// the Parquet reader then says what is wrong with it.
pub fn check_parquet_footer(path: &Path) -> std::io::Result<Result<(), TooLarge>> {
    let mut f = std::io::BufReader::new(fs_err::File::open(path)?);
    let len = f.seek(SeekFrom::End(0))?;
    if len < 12 {
        return Ok(Ok(()));
    }
    f.seek(SeekFrom::End(-8))?;
    let mut tail = [0u8; 8];
    f.read_exact(&mut tail)?;
    if &tail[4..] != b"PAR1" {
        return Ok(Ok(()));
    }
    let footer = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if footer + 8 > len {
        return Ok(Ok(()));
    }
    f.seek(SeekFrom::Start(len - 8 - footer))?;
    let mut t = Thrift {
        r: &mut f,
        left: footer,
    };
    // FileMetaData: 1 version, 2 schema, 3 num_rows, 4 row_groups, ...
    let mut row_groups = None;
    let mut last = 0;
    let mut read = || -> std::io::Result<()> {
        while let Some((id, ty)) = t.field(&mut last)? {
            if id == 4 && ty == T_LIST {
                row_groups = Some(t.list()?.0);
                return Ok(());
            }
            t.skip_value(ty, 1)?;
        }
        Ok(())
    };
    if read().is_err() {
        return Ok(Ok(()));
    }
    if let Some(n) = row_groups.filter(|&n| n > MAX_PARQUET_ROW_GROUPS as u64) {
        return Ok(Err(TooLarge {
            what: Limited::ParquetRowGroups,
            size: n,
            exact: true,
            place: Place::File,
        }));
    }
    if footer > MAX_PARQUET_FOOTER_BYTES as u64 {
        return Ok(Err(TooLarge {
            what: Limited::ParquetFooter,
            size: footer,
            exact: true,
            place: Place::File,
        }));
    }
    Ok(Ok(()))
}

/// Check every page of a Parquet file (`metadata` is its decoded footer) against
/// [`MAX_PARQUET_PAGE_BYTES`] by reading the page headers only, before any page is read or
/// decoded. A page header that does not parse ends the check of its column chunk: the Parquet
/// reader then says what is wrong.
pub fn check_parquet_pages(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
) -> std::io::Result<Result<(), TooLarge>> {
    let mut f = std::io::BufReader::with_capacity(4096, fs_err::File::open(path)?);
    let mut first_row = 1u64;
    for (g, rg) in metadata.row_groups().iter().enumerate() {
        for (c, col) in rg.columns().iter().enumerate() {
            let (start, len) = col.byte_range();
            f.seek(SeekFrom::Start(start))?;
            let mut t = Thrift {
                r: &mut f,
                left: len,
            };
            let mut rows = 0u64;
            while t.left > 0 {
                let Ok(page) = page_header(&mut t) else { break };
                if page.uncompressed.max(page.compressed) > MAX_PARQUET_PAGE_BYTES as u64 {
                    return Ok(Err(TooLarge {
                        what: Limited::ParquetPage,
                        size: page.uncompressed.max(page.compressed),
                        exact: true,
                        place: Place::Page {
                            row_group: g,
                            column: c,
                            first_row: first_row + rows,
                        },
                    }));
                }
                rows += page.rows;
                if t.skip(page.compressed).is_err() {
                    break;
                }
            }
        }
        first_row += rg.num_rows().max(0) as u64;
    }
    Ok(Ok(()))
}

struct PageSizes {
    uncompressed: u64,
    compressed: u64,
    rows: u64,
}

/// PageHeader: 1 type, 2 uncompressed_page_size, 3 compressed_page_size, 5 data_page_header
/// (1 num_values), 8 data_page_header_v2 (3 num_rows).
fn page_header(t: &mut Thrift<'_>) -> std::io::Result<PageSizes> {
    let mut p = PageSizes {
        uncompressed: 0,
        compressed: 0,
        rows: 0,
    };
    let mut last = 0;
    let size = |v: i64| u64::try_from(v).map_err(|_| malformed());
    while let Some((id, ty)) = t.field(&mut last)? {
        match (id, ty) {
            (2, T_I32) => p.uncompressed = size(t.int(ty)?)?,
            (3, T_I32) => p.compressed = size(t.int(ty)?)?,
            (5, T_STRUCT) => p.rows = size(t.struct_int(1)?.unwrap_or(0))?,
            (8, T_STRUCT) => p.rows = size(t.struct_int(3)?.unwrap_or(0))?,
            _ => t.skip_value(ty, 1)?,
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_of_the_limit_is_read_one_more_byte_is_not() {
        let text = b"abcd\r\nabcde\nab";
        let mut r = std::io::BufReader::with_capacity(2, &text[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line_limited(&mut r, &mut buf, 4).unwrap(), Line::Read);
        assert_eq!(buf, b"abcd\r\n");
        assert_eq!(
            read_line_limited(&mut r, &mut buf, 4).unwrap(),
            Line::TooLong
        );
        assert_eq!(buf, b"abcde");
    }

    #[test]
    fn csv_cells_are_measured_after_unquoting() {
        let ok = format!("a,b\n\"{}\",x\n", "\"\"".repeat(MAX_CELL_BYTES));
        let mut out = Vec::new();
        CsvLimiter::new(ok.as_bytes())
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, ok.as_bytes());
        let bad = format!("a,b\nx,\"\n{}\"\n", "y".repeat(MAX_CELL_BYTES));
        let e = CsvLimiter::new(bad.as_bytes())
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        let t = TooLarge::in_io(&e).unwrap();
        assert_eq!(t.what, Limited::Cell);
        assert_eq!(
            t.place,
            Place::Record {
                record: 1,
                line: 2,
                field: Some(1)
            }
        );
    }

    #[test]
    fn a_document_of_the_limit_is_read_one_more_byte_is_not() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("results.json");
        fs_err::write(&p, b"12345").unwrap();
        assert_eq!(read_limited(&p, 5).unwrap().unwrap(), b"12345");
        let t = read_limited(&p, 4).unwrap().unwrap_err();
        assert_eq!(t.what, Limited::Record);
    }
}
