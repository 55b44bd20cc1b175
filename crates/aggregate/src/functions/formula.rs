//! The formulas of [`crate::stats`] as scalar functions of each row's arguments.
//!
//! Integer arguments are BIGINT, human mean and SD DOUBLE (the signature casts what a plan
//! passes); any null argument gives a null.

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, StringArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use protospread_engine::plain_udf;
use std::sync::Arc;

use crate::Moments;

/// A BIGINT argument.
pub(super) const I: DataType = DataType::Int64;
/// A DOUBLE argument.
pub(super) const F: DataType = DataType::Float64;
/// The moments of the protocol side, then of the sampling side.
pub(super) const TWO_MOMENTS: [DataType; 6] = [I, I, I, I, I, I];

/// The arguments of one row.
pub(super) struct Row<'a> {
    args: &'a [ArrayRef],
    i: usize,
}

impl Row<'_> {
    /// Integer argument `k`.
    pub(super) fn int(&self, k: usize) -> Option<i64> {
        let a = self.args[k].as_primitive::<Int64Type>();
        a.is_valid(self.i).then(|| a.value(self.i))
    }

    /// Float argument `k`.
    pub(super) fn float(&self, k: usize) -> Option<f64> {
        let a = self.args[k].as_primitive::<Float64Type>();
        a.is_valid(self.i).then(|| a.value(self.i))
    }

    /// The moments in integer arguments `k`, `k + 1`, `k + 2` (count, sum, sum of squares).
    pub(super) fn moments(&self, k: usize) -> Option<Moments> {
        Some(Moments {
            n: self.int(k)?,
            sum: self.int(k + 1)?,
            sumsq: self.int(k + 2)?,
        })
    }
}

/// A result type of a formula, and its column.
pub(super) trait Value: Sized + Send + Sync + 'static {
    /// The SQL type.
    fn data_type() -> DataType;
    /// The column of these values.
    fn column(values: Vec<Option<Self>>) -> ArrayRef;
}

impl Value for f64 {
    fn data_type() -> DataType {
        DataType::Float64
    }
    fn column(values: Vec<Option<Self>>) -> ArrayRef {
        Arc::new(Float64Array::from(values))
    }
}

impl Value for bool {
    fn data_type() -> DataType {
        DataType::Boolean
    }
    fn column(values: Vec<Option<Self>>) -> ArrayRef {
        Arc::new(BooleanArray::from(values))
    }
}

impl Value for &'static str {
    fn data_type() -> DataType {
        DataType::Utf8
    }
    fn column(values: Vec<Option<Self>>) -> ArrayRef {
        Arc::new(StringArray::from(values))
    }
}

/// `formula` of each row's arguments (of types `inputs`) under `name`.
pub(super) fn per_row<T: Value>(
    name: &'static str,
    inputs: &[DataType],
    formula: fn(&Row<'_>) -> Option<T>,
) -> ScalarUDF {
    let types = inputs.to_vec();
    let body = move |args: &[ArrayRef]| {
        // The signature casts every argument, so a mismatch is DataFusion's error, not the
        // plan's.
        if args.len() != types.len() || args.iter().zip(&types).any(|(a, t)| a.data_type() != t) {
            let got: Vec<String> = args.iter().map(|a| a.data_type().to_string()).collect();
            return Err(DataFusionError::Internal(format!(
                "{name}: expected arguments {types:?}, got [{}]",
                got.join(", ")
            )));
        }
        let rows = args.first().map_or(0, |x| x.len());
        let values = (0..rows).map(|i| formula(&Row { args, i })).collect();
        Ok(T::column(values))
    };
    let signature = Signature::exact(inputs.to_vec(), Volatility::Immutable);
    plain_udf(name, signature, T::data_type(), body)
}
