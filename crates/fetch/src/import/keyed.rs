//! The sort of a file whose records are not in the output order, on one integer per record.
//!
//! Sorted by (model, condition, sample, test, item) as texts, DataFusion compares strings
//! column by column for every pair it orders, and the groupings that checked the rules across
//! records compared them again: in a shuffled file of 10^7 answers, most of the fetch stage.
//! The key's texts have few distinct values (models, conditions, tests), and they are staged
//! as codes (`coded`) while [`KeyDomain`] takes the range of the integer columns; [`Packing`]
//! then turns each code into its text's rank among them (byte order, as Arrow compares
//! strings) and packs the whole key into one `u64` whose order is the key's order. The sort is on that one primitive column, spilling
//! under the memory pool as any DataFusion sort, whatever the file's order; once the records
//! are in order, the rules across records hold exactly when they hold between neighbours
//! (`sorted::InOrder`), as for a file that came sorted.

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, UInt32Array, UInt64Array};
use arrow::datatypes::{DataType, UInt32Type};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

/// The name under which [`Packing::udf`] is registered; its arguments are the stored-answer
/// sort key's columns in order.
pub(crate) const KEY_FUNCTION: &str = "stored_answer_key";

/// The text columns of the sort key, in the key's order.
pub(crate) const TEXTS: [&str; 3] = ["model", "condition", "test"];

/// The range of the sort key's integer columns in a file; the values of its text columns
/// are the coder's (`coded`).
#[derive(Debug, Default)]
pub(crate) struct KeyDomain {
    /// Least and greatest sample.
    samples: Option<(i32, i32)>,
    /// Least and greatest item (whole-test records have none).
    items: Option<(i32, i32)>,
}

fn named<'a>(batch: &'a RecordBatch, name: &str) -> Result<&'a ArrayRef, ArrowError> {
    batch
        .column_by_name(name)
        .ok_or_else(|| ArrowError::SchemaError(format!("no column {name}")))
}

fn int32(a: &ArrayRef, name: &str) -> Result<Int32Array, ArrowError> {
    a.as_primitive_opt::<arrow::datatypes::Int32Type>()
        .cloned()
        .ok_or_else(|| ArrowError::SchemaError(format!("{name}: expected Int32")))
}

fn widen(range: Option<(i32, i32)>, a: &Int32Array) -> Option<(i32, i32)> {
    let (lo, hi) = (arrow::compute::min(a), arrow::compute::max(a));
    match (range, lo, hi) {
        (Some((l, h)), Some(lo), Some(hi)) => Some((l.min(lo), h.max(hi))),
        (None, Some(lo), Some(hi)) => Some((lo, hi)),
        (range, _, _) => range,
    }
}

impl KeyDomain {
    /// Take in the key values of one batch of validated records.
    pub(crate) fn observe(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        self.samples = widen(self.samples, &int32(named(batch, "sample")?, "sample")?);
        self.items = widen(self.items, &int32(named(batch, "item")?, "item")?);
        Ok(())
    }

    /// The packing of the key into one `u64`, where `texts` are the distinct model,
    /// condition and test texts by code, or `None` when the key does not fit in 64 bits
    /// (then the records are sorted by the key's columns themselves).
    pub(crate) fn packing(self, texts: [Vec<&str>; 3]) -> Option<Packing> {
        let codes = texts.map(|values| {
            let mut by_text: Vec<u32> = (0..values.len() as u32).collect();
            by_text.sort_unstable_by(|a, b| values[*a as usize].cmp(values[*b as usize]));
            by_text
        });
        let ranks = codes.clone().map(|by_text| {
            let mut ranks = vec![0u64; by_text.len()];
            for (rank, code) in by_text.into_iter().enumerate() {
                ranks[code as usize] = rank as u64;
            }
            ranks
        });
        let span = |r: Option<(i32, i32)>| {
            r.map_or(1, |(lo, hi)| (i64::from(hi) - i64::from(lo)) as u64 + 1)
        };
        let sample_min = self.samples.map_or(0, |(lo, _)| lo);
        let item_min = self.items.map_or(0, |(lo, _)| lo);
        // Values per component: an item is 0 for a whole-test record (nulls first), else
        // its offset from the least item plus one.
        let counts = [
            ranks[0].len() as u64,
            ranks[1].len() as u64,
            span(self.samples),
            ranks[2].len() as u64,
            span(self.items) + 1,
        ];
        let bits = counts.map(bits_for);
        if bits.iter().sum::<u32>() > u64::BITS {
            return None;
        }
        Some(Packing(Arc::new(Inner {
            ranks,
            codes,
            sample_min,
            item_min,
            bits,
        })))
    }
}

/// Bits that hold the values `0..n`.
fn bits_for(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        u64::BITS - (n - 1).leading_zeros()
    }
}

/// The key's values, ranked; see [`KeyDomain::packing`].
#[derive(Debug, Clone)]
pub(crate) struct Packing(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Rank of each model, condition and test text, by its code.
    ranks: [Vec<u64>; 3],
    /// The code of each rank: the inverse of `ranks`.
    codes: [Vec<u32>; 3],
    sample_min: i32,
    item_min: i32,
    /// Bits of model, condition, sample, test and item, most significant first.
    bits: [u32; 5],
}

impl Packing {
    /// `stored_answer_key(model, condition, sample, test, item)`, ready to register.
    pub(crate) fn udf(&self) -> ScalarUDF {
        ScalarUDF::from(KeyUdf {
            packing: self.clone(),
            signature: Signature::any(5, Volatility::Immutable),
        })
    }

    /// The packed keys of rows whose key columns are `args` (model, condition, sample, test,
    /// item; the texts as their codes).
    fn keys(&self, args: &[ArrayRef]) -> Result<UInt64Array> {
        let p = &self.0;
        let [model, condition, sample, test, item] = args else {
            return exec_err!("{KEY_FUNCTION}: expected 5 arguments, got {}", args.len());
        };
        let (model, condition, test) = (
            code_arg(model, TEXTS[0])?,
            code_arg(condition, TEXTS[1])?,
            code_arg(test, TEXTS[2])?,
        );
        let int = |a: &ArrayRef| arrow::compute::cast(a, &DataType::Int32);
        let (sample, item) = (int(sample)?, int(item)?);
        let (sample, item) = (
            sample.as_primitive::<arrow::datatypes::Int32Type>(),
            item.as_primitive::<arrow::datatypes::Int32Type>(),
        );
        if sample.null_count() > 0 {
            return exec_err!("{KEY_FUNCTION}: sample is null");
        }
        let mut out = Vec::with_capacity(model.len());
        for i in 0..model.len() {
            let parts = [
                rank(&p.ranks[0], model, i, TEXTS[0])?,
                rank(&p.ranks[1], condition, i, TEXTS[1])?,
                (i64::from(sample.value(i)) - i64::from(p.sample_min)) as u64,
                rank(&p.ranks[2], test, i, TEXTS[2])?,
                if item.is_valid(i) {
                    (i64::from(item.value(i)) - i64::from(p.item_min)) as u64 + 1
                } else {
                    0
                },
            ];
            let mut key = 0u64;
            for (v, b) in parts.into_iter().zip(p.bits) {
                key = key.checked_shl(b).unwrap_or(0) | v;
            }
            out.push(key);
        }
        Ok(UInt64Array::from(out))
    }
}

impl Packing {
    /// The key's columns of packed `keys`, by name, twice: the texts as their ranks (equal
    /// when the texts are, and in their order: what the checks between neighbours compare),
    /// and as their codes (what is decoded); sample and item as numbers (a whole-test
    /// record's item null) in both.
    pub(crate) fn unpack(&self, keys: &UInt64Array) -> [Vec<(String, ArrayRef)>; 2] {
        let p = &self.0;
        let mut shift = 0u32;
        let mut parts: Vec<Vec<u64>> = Vec::with_capacity(5);
        for b in p.bits.iter().rev() {
            let mask = if *b == 0 {
                0
            } else {
                u64::MAX >> (u64::BITS - b)
            };
            parts.push(
                keys.values()
                    .iter()
                    .map(|k| k.checked_shr(shift).unwrap_or(0) & mask)
                    .collect(),
            );
            shift += b;
        }
        parts.reverse();
        let sample: ArrayRef = Arc::new(Int32Array::from_iter_values(
            parts[2]
                .iter()
                .map(|v| (i64::from(p.sample_min) + *v as i64) as i32),
        ));
        let item: ArrayRef = Arc::new(
            parts[4]
                .iter()
                .map(|v| (*v > 0).then(|| (i64::from(p.item_min) + *v as i64 - 1) as i32))
                .collect::<Int32Array>(),
        );
        [true, false].map(|ranked| {
            let text = |k: usize, part: &[u64]| -> ArrayRef {
                Arc::new(UInt32Array::from_iter_values(part.iter().map(|r| {
                    if ranked {
                        *r as u32
                    } else {
                        p.codes[k][*r as usize]
                    }
                })))
            };
            vec![
                (TEXTS[0].into(), text(0, &parts[0])),
                (TEXTS[1].into(), text(1, &parts[1])),
                ("sample".into(), sample.clone()),
                (TEXTS[2].into(), text(2, &parts[3])),
                ("item".into(), item.clone()),
            ]
        })
    }
}

fn code_arg<'a>(a: &'a ArrayRef, name: &str) -> Result<&'a UInt32Array> {
    match a.as_primitive_opt::<UInt32Type>() {
        Some(codes) => Ok(codes),
        None => exec_err!("{KEY_FUNCTION}: {name} is {}, not a code", a.data_type()),
    }
}

/// The rank of the text whose code is row `i` of `codes` (column `name`).
fn rank(ranks: &[u64], codes: &UInt32Array, i: usize, name: &str) -> Result<u64> {
    if codes.is_null(i) {
        return exec_err!("{KEY_FUNCTION}: {name} is null");
    }
    let code = codes.value(i);
    match ranks.get(code as usize) {
        Some(&r) => Ok(r),
        None => exec_err!("{KEY_FUNCTION}: {name} code {code} was not staged"),
    }
}

#[derive(Debug)]
struct KeyUdf {
    packing: Packing,
    signature: Signature,
}

impl PartialEq for KeyUdf {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.packing.0, &other.packing.0)
    }
}

impl Eq for KeyUdf {}

impl std::hash::Hash for KeyUdf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.packing.0).hash(state);
    }
}

impl ScalarUDFImpl for KeyUdf {
    fn name(&self) -> &str {
        KEY_FUNCTION
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(Arc::new(self.packing.keys(&arrays)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::coded::Coder;
    use proptest::prelude::*;
    use protospread_core::STORED_ANSWERS;

    /// Stored answers (the contract's columns) with these keys (model, condition, sample,
    /// test, item).
    fn batch(rows: &[(&str, &str, i32, &str, Option<i32>)]) -> RecordBatch {
        let records: Vec<_> = rows
            .iter()
            .map(|&(m, c, s, t, i)| protospread_testutils::keyed_request(m, c, s, t, i))
            .collect();
        protospread_format::to_batch(&records).unwrap()
    }

    /// The arguments of [`KEY_FUNCTION`]: the contract's sort key columns of coded `b`, in
    /// order.
    fn key_columns(b: &RecordBatch) -> Vec<ArrayRef> {
        STORED_ANSWERS
            .sort_key
            .iter()
            .map(|k| b.column_by_name(k).unwrap().clone())
            .collect()
    }

    /// The coder after `b`, `b` coded, and the packing of its keys.
    fn packed(b: &RecordBatch) -> (Coder, RecordBatch, Option<Packing>) {
        let mut coder = Coder::new(
            b.schema(),
            &["sample", "item", "reply", "item_order", "error"],
        );
        let coded = coder.encode(b).unwrap();
        let mut d = KeyDomain::default();
        d.observe(&coded).unwrap();
        let packing = d.packing(TEXTS.map(|t| coder.texts(t)));
        (coder, coded, packing)
    }

    fn keys_of(rows: &[(&str, &str, i32, &str, Option<i32>)]) -> Vec<u64> {
        let (_, coded, packing) = packed(&batch(rows));
        packing
            .expect("fits")
            .keys(&key_columns(&coded))
            .unwrap()
            .values()
            .to_vec()
    }

    const TEXT: [&str; 5] = ["", "a", "ab", "b", "\u{e9}"];

    /// Keys (model, condition, sample, test, item) over texts sharing prefixes and negative
    /// numbers.
    fn key_rows(
    ) -> impl Strategy<Value = Vec<(&'static str, &'static str, i32, &'static str, Option<i32>)>>
    {
        proptest::collection::vec(
            (
                0..5usize,
                0..5usize,
                -3..4i32,
                0..5usize,
                proptest::option::of(-2..50i32),
            ),
            1..40,
        )
        .prop_map(|rows| {
            rows.into_iter()
                .map(|(m, c, s, t, i)| (TEXT[m], TEXT[c], s, TEXT[t], i))
                .collect()
        })
    }

    proptest! {
        /// Packed keys order rows exactly as the key's columns do (texts in byte order,
        /// integers ascending, a missing item first), over texts sharing prefixes and
        /// negative numbers.
        #[test]
        fn packed_keys_order_rows_as_the_columns_do(
            rows in key_rows()
        ) {
            let keys = keys_of(&rows);
            for a in 0..rows.len() {
                for b in 0..rows.len() {
                    let (x, y) = (&rows[a], &rows[b]);
                    let by_columns = (x.0, x.1, x.2, x.3, x.4).cmp(&(y.0, y.1, y.2, y.3, y.4));
                    prop_assert_eq!(keys[a].cmp(&keys[b]), by_columns, "{:?} vs {:?}", x, y);
                }
            }
        }
    }

    proptest! {
        /// Unpacking a packed key gives back the codes and numbers it was packed from.
        #[test]
        fn packed_keys_unpack_to_their_columns(
            rows in key_rows()
        ) {
            let (_, coded, packing) = packed(&batch(&rows));
            let packing = packing.expect("fits");
            let keys = packing.keys(&key_columns(&coded)).unwrap();
            let [_, codes] = packing.unpack(&keys);
            for (name, column) in codes {
                prop_assert_eq!(&column, coded.column_by_name(&name).unwrap(), "{}", name);
            }
        }
    }

    #[test]
    fn a_key_wider_than_64_bits_is_not_packed() {
        let b = batch(&[
            ("m", "c", i32::MIN, "t", Some(i32::MIN)),
            ("m", "c", i32::MAX, "t", Some(i32::MAX)),
        ]);
        assert!(packed(&b).2.is_none());
    }

    #[test]
    fn a_text_not_staged_is_an_error() {
        let (mut coder, _, packing) = packed(&batch(&[("m", "c", 1, "t", None)]));
        let other = coder.encode(&batch(&[("n", "c", 1, "t", None)])).unwrap();
        let e = packing.unwrap().keys(&key_columns(&other)).unwrap_err();
        assert!(e.to_string().contains("model code 1 was not staged"), "{e}");
    }
}
