//! The staged records of a file not in the output order carry their repeated values as codes,
//! and the sort moves as little of them as it can.
//!
//! Every column but the free texts (reply, item order, error) and the key's integers takes few
//! distinct values in a study (studies, models, arms, cohorts, conditions, tests, modes, option
//! orders, instructions, labels, temperatures, seeds), yet as texts they were most of a staged
//! row: the sort that puts the records in order moved and spilled them all (1.4 GB of spill
//! files for 10^7 answers in a shuffled file, against a staged file of 40 MB). [`Coder`]
//! replaces each by a `UInt32` code while the records are staged, numbering the values in the
//! order they first appear. The sort then carries one packed key (`keyed`, which holds the
//! key's columns), the other codes packed into one integer ([`Radix`], when they fit) and the
//! free texts; [`Decoder`] turns codes back into the same values as the sorted records stream
//! out. The codes never leave the import, and the sort is on the key's ranks, not on codes,
//! so the output does not depend on the file's order.

use arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array,
    UInt64Array,
};
use arrow::compute::{cast, take};
use arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef, UInt32Type};
use arrow::error::ArrowError;
use datafusion::common::{exec_err, HashMap};
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use std::sync::Arc;

/// The name under which [`Radix::udf`] is registered; its arguments are the codes of
/// [`Radix::columns`] in order.
pub(crate) const SETTINGS_FUNCTION: &str = "stored_answer_settings";

/// A coded value. Values are told apart as [`Column`] looks them up: texts by their bytes,
/// integers by value, floats by their bits (so that `-0` and `0` stay apart, as the checks
/// across records keep them).
#[derive(Debug, Clone)]
enum Value {
    Text(Box<str>),
    Int(i64),
    Bits(u64),
}

/// How a column's values are compared and stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Float,
}

impl Kind {
    fn of(t: &DataType) -> Option<Kind> {
        match t {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(Kind::Text),
            // Every integer but an unsigned 64-bit one is an i64 exactly.
            t if t.is_integer() && *t != DataType::UInt64 => Some(Kind::Int),
            t if t.is_floating() => Some(Kind::Float),
            _ => None,
        }
    }

    /// The type the values are read as before they are looked up (a float by its bits).
    fn read_as(self) -> DataType {
        match self {
            Kind::Text => DataType::Utf8,
            Kind::Int => DataType::Int64,
            Kind::Float => DataType::Float64,
        }
    }
}

/// One coded column: its position and type in the staging schema, and its values by code.
/// The codes are looked up by the values' own bytes (texts) or bits (numbers), so that a row
/// costs one hash lookup, or none when it repeats the row before.
#[derive(Debug)]
struct Column {
    index: usize,
    kind: Kind,
    texts: HashMap<Box<str>, u32>,
    numbers: HashMap<u64, u32>,
    values: Vec<Value>,
}

/// Codes the repeated values of staged batches ([`Coder::encode`]); see the module's doc.
#[derive(Debug)]
pub(crate) struct Coder {
    plain: SchemaRef,
    coded: SchemaRef,
    columns: Vec<Column>,
}

impl Coder {
    /// A coder for batches of `plain` (the staging schema) that codes every text and number
    /// column not named in `uncoded`.
    pub(crate) fn new(plain: SchemaRef, uncoded: &[&str]) -> Self {
        let mut columns = Vec::new();
        let fields: Vec<Field> = plain
            .fields()
            .iter()
            .enumerate()
            .map(|(index, f)| match Kind::of(f.data_type()) {
                Some(kind) if !uncoded.contains(&f.name().as_str()) => {
                    columns.push(Column {
                        index,
                        kind,
                        texts: HashMap::default(),
                        numbers: HashMap::default(),
                        values: Vec::new(),
                    });
                    f.as_ref().clone().with_data_type(DataType::UInt32)
                }
                _ => f.as_ref().clone(),
            })
            .collect();
        let coded = Arc::new(Schema::new_with_metadata(fields, plain.metadata().clone()));
        Coder {
            plain,
            coded,
            columns,
        }
    }

    /// The schema of the coded batches: the staging schema with `UInt32` for each coded column.
    pub(crate) fn schema(&self) -> SchemaRef {
        self.coded.clone()
    }

    /// `batch` (of the staging schema) with its coded columns replaced by their codes; values
    /// not seen before get the next codes.
    pub(crate) fn encode(&mut self, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
        let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
        for c in &mut self.columns {
            cols[c.index] = c.encode(&cols[c.index])?;
        }
        RecordBatch::try_new(self.coded.clone(), cols)
    }

    fn column(&self, name: &str) -> Option<&Column> {
        let index = self.plain.index_of(name).ok()?;
        self.columns.iter().find(|c| c.index == index)
    }

    /// The distinct texts of text column `name` by code (empty if it is not a coded text).
    pub(crate) fn texts(&self, name: &str) -> Vec<&str> {
        self.column(name)
            .map(|c| {
                c.values
                    .iter()
                    .map(|v| match v {
                        Value::Text(t) => &**t,
                        _ => "",
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The names of the coded columns, in the staging schema's order.
    pub(crate) fn coded_columns(&self) -> Vec<&str> {
        self.columns
            .iter()
            .map(|c| self.plain.field(c.index).name().as_str())
            .collect()
    }

    /// The packing of the codes of `columns` into one `u64`, or `None` when their values
    /// together need more than 64 bits.
    pub(crate) fn radix(&self, columns: &[&str]) -> Option<Radix> {
        let mut span: u128 = 1;
        let mut parts = Vec::with_capacity(columns.len());
        for name in columns {
            // One value more than the codes: 0 stands for null.
            let base = self.column(name)?.values.len() as u128 + 1;
            span = span.checked_mul(base)?;
            parts.push(((*name).to_string(), base as u64));
        }
        (span <= u128::from(u64::MAX)).then(|| Radix(Arc::new(parts)))
    }

    /// The decoder of every batch encoded so far.
    pub(crate) fn decoder(&self) -> Decoder {
        Decoder {
            values: Arc::new(
                self.columns
                    .iter()
                    .map(|c| {
                        let f = self.plain.field(c.index);
                        (f.name().clone(), c.values_array(f.data_type()))
                    })
                    .collect(),
            ),
        }
    }
}

impl Column {
    /// The codes of `array`, nulls kept.
    fn encode(&mut self, array: &ArrayRef) -> Result<ArrayRef, ArrowError> {
        let kind = self.kind;
        let hashed = if array.data_type() == &kind.read_as() {
            array.clone()
        } else {
            cast(array, &kind.read_as())?
        };
        let codes = match kind {
            Kind::Text => codes_of(hashed.as_string::<i32>().iter(), |v| self.text_code(v))?,
            Kind::Int => codes_of(
                hashed
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .iter()
                    .map(|v| v.map(|v| v as u64)),
                |b| self.number_code(b),
            )?,
            Kind::Float => codes_of(
                hashed
                    .as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| v.map(f64::to_bits)),
                |b| self.number_code(b),
            )?,
        };
        Ok(Arc::new(UInt32Array::new(
            codes.into(),
            hashed.logical_nulls(),
        )))
    }

    /// The next free code, for a value about to be added to `values`.
    fn next_code(&self) -> Result<u32, ArrowError> {
        u32::try_from(self.values.len())
            .map_err(|_| ArrowError::ComputeError("more than 2^32 distinct values".into()))
    }

    fn text_code(&mut self, v: &str) -> Result<u32, ArrowError> {
        if let Some(&code) = self.texts.get(v) {
            return Ok(code);
        }
        let code = self.next_code()?;
        self.texts.insert(v.into(), code);
        self.values.push(Value::Text(v.into()));
        Ok(code)
    }

    /// The code of an integer (its two's complement) or a float (its bits), by `kind`.
    fn number_code(&mut self, bits: u64) -> Result<u32, ArrowError> {
        if let Some(&code) = self.numbers.get(&bits) {
            return Ok(code);
        }
        let code = self.next_code()?;
        self.numbers.insert(bits, code);
        self.values.push(match self.kind {
            Kind::Float => Value::Bits(bits),
            _ => Value::Int(bits as i64),
        });
        Ok(code)
    }

    /// The values by code, as an array of type `t`.
    fn values_array(&self, t: &DataType) -> ArrayRef {
        let array: ArrayRef = match self.kind {
            Kind::Text => Arc::new(StringArray::from_iter_values(self.values.iter().map(
                |v| match v {
                    Value::Text(s) => &**s,
                    _ => "",
                },
            ))),
            Kind::Int => Arc::new(Int64Array::from_iter_values(self.values.iter().map(
                |v| match v {
                    Value::Int(i) => *i,
                    _ => 0,
                },
            ))),
            Kind::Float => Arc::new(Float64Array::from_iter_values(self.values.iter().map(
                |v| match v {
                    Value::Bits(b) => f64::from_bits(*b),
                    _ => 0.0,
                },
            ))),
        };
        // Every value came from a column of type `t`, so it casts back unchanged.
        cast(&array, t).unwrap_or(array)
    }
}

/// The code of each of `values` by `code_of`, 0 for a null (the caller keeps the null). A value
/// equal to the one before takes its code without a lookup: sorted and exported files repeat
/// a value over long runs of rows.
fn codes_of<T: PartialEq + Copy>(
    values: impl Iterator<Item = Option<T>>,
    mut code_of: impl FnMut(T) -> Result<u32, ArrowError>,
) -> Result<Vec<u32>, ArrowError> {
    let mut last: Option<(T, u32)> = None;
    values
        .map(|v| {
            let Some(v) = v else { return Ok(0) };
            match last {
                Some((p, c)) if p == v => Ok(c),
                _ => {
                    let c = code_of(v)?;
                    last = Some((v, c));
                    Ok(c)
                }
            }
        })
        .collect()
}

/// The codes of some columns packed into one `u64` by mixed radix: each column's code plus
/// one (0 for null), in the columns' order, most significant first.
#[derive(Debug, Clone)]
pub(crate) struct Radix(Arc<Vec<(String, u64)>>);

impl Radix {
    /// The columns packed, in order.
    pub(crate) fn columns(&self) -> Vec<&str> {
        self.0.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// `stored_answer_settings(codes...)`, ready to register.
    pub(crate) fn udf(&self) -> ScalarUDF {
        let radix = self.clone();
        protospread_engine::plain_udf(
            SETTINGS_FUNCTION,
            Signature::any(self.0.len(), Volatility::Immutable),
            DataType::UInt64,
            move |args| Ok(Arc::new(radix.pack(args)?)),
        )
    }

    fn pack(&self, args: &[ArrayRef]) -> datafusion::common::Result<UInt64Array> {
        if args.len() != self.0.len() {
            return exec_err!("{SETTINGS_FUNCTION}: expected {} arguments", self.0.len());
        }
        let len = args.first().map_or(0, |a| a.len());
        let mut out = vec![0u64; len];
        for (a, (name, base)) in args.iter().zip(self.0.iter()) {
            let Some(codes) = a.as_primitive_opt::<UInt32Type>() else {
                return exec_err!(
                    "{SETTINGS_FUNCTION}: {name} is {}, not a code",
                    a.data_type()
                );
            };
            for (i, o) in out.iter_mut().enumerate() {
                let digit = if codes.is_valid(i) {
                    u64::from(codes.value(i)) + 1
                } else {
                    0
                };
                if digit >= *base {
                    return exec_err!("{SETTINGS_FUNCTION}: {name} code {digit} was not staged");
                }
                *o = *o * base + digit;
            }
        }
        Ok(UInt64Array::from(out))
    }

    /// The code columns of packed `values`, by name, in [`Radix::columns`]' order.
    pub(crate) fn unpack(&self, values: &UInt64Array) -> Vec<(String, ArrayRef)> {
        let mut rest: Vec<u64> = values.values().to_vec();
        let mut out: Vec<(String, ArrayRef)> = self
            .0
            .iter()
            .rev()
            .map(|(name, base)| {
                let codes: UInt32Array = rest
                    .iter_mut()
                    .map(|v| {
                        let digit = *v % base;
                        *v /= base;
                        (digit > 0).then(|| (digit - 1) as u32)
                    })
                    .collect();
                (name.clone(), Arc::new(codes) as ArrayRef)
            })
            .collect();
        out.reverse();
        out
    }
}

/// Turns coded columns back into values; see the module's doc.
#[derive(Debug, Clone)]
pub(crate) struct Decoder {
    /// The values by code of every coded column, by name.
    values: Arc<Vec<(String, ArrayRef)>>,
}

impl Decoder {
    /// The columns of `schema`, each taken by name from `columns` (decoded when it is a coded
    /// column) and cast to its type in `schema`.
    pub(crate) fn decode(
        &self,
        columns: &[(String, ArrayRef)],
        schema: SchemaRef,
    ) -> Result<RecordBatch, ArrowError> {
        let mut cols = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            let col = columns
                .iter()
                .rev()
                .find(|(n, _)| n == f.name())
                .map(|(_, c)| c)
                .ok_or_else(|| ArrowError::SchemaError(format!("no column {}", f.name())))?;
            let col = match self.values.iter().find(|(n, _)| n == f.name()) {
                Some((_, values)) => {
                    let codes = cast(col, &DataType::UInt32)?;
                    take(values.as_ref(), codes.as_primitive::<UInt32Type>(), None)?
                }
                None => col.clone(),
            };
            cols.push(if col.data_type() == f.data_type() {
                col
            } else {
                cast(&col, f.data_type())?
            });
        }
        RecordBatch::try_new(schema, cols)
    }
}

/// A batch of `columns` (nullable fields of their arrays' types), in their order.
pub(crate) fn batch_of(columns: Vec<(String, ArrayRef)>) -> Result<RecordBatch, ArrowError> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, c)| Field::new(n, c.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, c)| c).collect(),
    )
}

/// The columns of `b` by name.
pub(crate) fn named_columns(b: &RecordBatch) -> Vec<(String, ArrayRef)> {
    b.schema()
        .fields()
        .iter()
        .zip(b.columns())
        .map(|(f, c)| (f.name().clone(), c.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int32Array;

    fn plain() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("model", DataType::Utf8, false),
            Field::new("sample", DataType::Int32, false),
            Field::new("cohort", DataType::Utf8, true),
            Field::new("temperature", DataType::Float64, true),
            Field::new("reply", DataType::Utf8, false),
        ]))
    }

    type Row = (
        &'static str,
        i32,
        Option<&'static str>,
        Option<f64>,
        &'static str,
    );

    fn batch(rows: &[Row]) -> RecordBatch {
        RecordBatch::try_new(
            plain(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.1))),
                Arc::new(rows.iter().map(|r| r.2).collect::<StringArray>()),
                Arc::new(rows.iter().map(|r| r.3).collect::<Float64Array>()),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.4))),
            ],
        )
        .unwrap()
    }

    fn codes(b: &RecordBatch, i: usize) -> Vec<Option<u32>> {
        b.column(i).as_primitive::<UInt32Type>().iter().collect()
    }

    #[test]
    fn codes_number_values_as_they_first_appear_across_batches_and_decode_back() {
        let mut coder = Coder::new(plain(), &["sample", "reply"]);
        let a = batch(
            &[("m2", 1, None, Some(0.0)), ("m1", 2, Some("c"), Some(-0.0))]
                .map(|(m, s, c, t)| (m, s, c, t, "3")),
        );
        let b = batch(&[
            ("m1", 3, Some("c"), None, "x"),
            ("m3", 4, Some("d"), Some(0.0), "5"),
        ]);
        let (ca, cb) = (coder.encode(&a).unwrap(), coder.encode(&b).unwrap());
        assert_eq!(codes(&ca, 0), [Some(0), Some(1)]);
        assert_eq!(codes(&cb, 0), [Some(1), Some(2)]);
        assert_eq!(codes(&ca, 2), [None, Some(0)]);
        assert_eq!(codes(&cb, 2), [Some(0), Some(1)]);
        assert_eq!(codes(&ca, 3), [Some(0), Some(1)], "-0 is not 0");
        assert_eq!(codes(&cb, 3), [None, Some(0)]);
        assert_eq!(
            ca.schema().field(1).data_type(),
            &DataType::Int32,
            "uncoded"
        );
        assert_eq!(ca.schema().field(4).data_type(), &DataType::Utf8, "uncoded");
        assert_eq!(coder.texts("model"), ["m2", "m1", "m3"]);
        assert_eq!(coder.coded_columns(), ["model", "cohort", "temperature"]);
        let d = coder.decoder();
        let back = d.decode(&named_columns(&ca), plain()).unwrap();
        assert_eq!(back, a);
        let t = back.column(3).as_primitive::<Float64Type>();
        assert!(t.value(1).is_sign_negative());
        assert_eq!(d.decode(&named_columns(&cb), plain()).unwrap(), b);
    }

    /// Codes numbered by first appearance, counted the slow way over all rows.
    fn first_appearances<T: PartialEq + Copy>(v: &[Option<T>]) -> Vec<Option<u32>> {
        let mut seen: Vec<T> = Vec::new();
        v.iter()
            .map(|x| {
                x.map(|x| match seen.iter().position(|s| *s == x) {
                    Some(p) => p as u32,
                    None => {
                        seen.push(x);
                        seen.len() as u32 - 1
                    }
                })
            })
            .collect()
    }

    proptest::proptest! {
        /// Runs of a value, values coming back after others, nulls inside runs and batches
        /// cut anywhere: every row gets the code of its value's first appearance.
        #[test]
        fn codes_are_first_appearances_whatever_the_runs_and_batches(
            rows in proptest::collection::vec((0usize..4, proptest::option::of(0usize..3), proptest::option::of(0usize..3)), 0..80),
            cut in 0usize..80,
        ) {
            const MODELS: [&str; 4] = ["a", "b", "ab", ""];
            const COHORTS: [&str; 3] = ["x", "y", "z"];
            const TEMPS: [f64; 3] = [0.0, -0.0, 0.5];
            let all: Vec<Row> = rows
                .iter()
                .map(|(m, c, t)| (MODELS[*m], 1, c.map(|c| COHORTS[c]), t.map(|t| TEMPS[t]), "r"))
                .collect();
            let cut = cut.min(all.len());
            let mut coder = Coder::new(plain(), &["sample", "reply"]);
            let (a, b) = (coder.encode(&batch(&all[..cut])).unwrap(), coder.encode(&batch(&all[cut..])).unwrap());
            let joined = |i: usize| [codes(&a, i), codes(&b, i)].concat();
            let models: Vec<Option<&str>> = all.iter().map(|r| Some(r.0)).collect();
            let cohorts: Vec<Option<&str>> = all.iter().map(|r| r.2).collect();
            let temps: Vec<Option<u64>> = all.iter().map(|r| r.3.map(f64::to_bits)).collect();
            proptest::prop_assert_eq!(joined(0), first_appearances(&models));
            proptest::prop_assert_eq!(joined(2), first_appearances(&cohorts));
            proptest::prop_assert_eq!(joined(3), first_appearances(&temps));
            let d = coder.decoder();
            proptest::prop_assert_eq!(d.decode(&named_columns(&a), plain()).unwrap(), batch(&all[..cut]));
            proptest::prop_assert_eq!(d.decode(&named_columns(&b), plain()).unwrap(), batch(&all[cut..]));
        }
    }

    #[test]
    fn packed_settings_unpack_to_their_codes_with_nulls() {
        let mut coder = Coder::new(plain(), &["sample", "reply"]);
        let a = batch(&[
            ("m2", 1, None, Some(0.5), "3"),
            ("m1", 2, Some("c"), None, "4"),
            ("m3", 2, Some("d"), Some(0.5), "4"),
        ]);
        let ca = coder.encode(&a).unwrap();
        let radix = coder.radix(&["cohort", "temperature", "model"]).unwrap();
        let packed = radix
            .pack(&[
                ca.column(2).clone(),
                ca.column(3).clone(),
                ca.column(0).clone(),
            ])
            .unwrap();
        let un = radix.unpack(&packed);
        let names: Vec<&str> = un.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["cohort", "temperature", "model"]);
        assert_eq!(&un[0].1, ca.column(2));
        assert_eq!(&un[1].1, ca.column(3));
        assert_eq!(&un[2].1, ca.column(0));
        let mut columns = named_columns(&ca);
        columns.retain(|(n, _)| ["sample", "reply"].contains(&n.as_str()));
        columns.extend(un);
        assert_eq!(coder.decoder().decode(&columns, plain()).unwrap(), a);
    }

    #[test]
    fn settings_too_many_to_pack_are_not_packed() {
        let mut coder = Coder::new(plain(), &["reply"]);
        let rows: Vec<Row> = (0..70_000)
            .map(|i| ("m", i, None, Some(f64::from(i)), "r"))
            .collect();
        coder.encode(&batch(&rows)).unwrap();
        assert!(coder.radix(&["sample", "temperature"]).is_some());
        assert!(coder
            .radix(&["sample", "temperature", "sample", "temperature"])
            .is_none());
    }
}
