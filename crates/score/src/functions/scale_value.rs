//! `scale_value(points, max_points, raw_unit)`: the scorer's value of a complete dimension,
//! [`crate::scorer::scale_value`].

use crate::kernels::cast_args;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use protospread_engine::plain_udf;
use std::sync::Arc;

/// The function, ready to register.
pub(super) fn udf() -> ScalarUDF {
    plain_udf(
        "scale_value",
        Signature::any(3, Volatility::Immutable),
        DataType::Float64,
        scale_value,
    )
}

fn scale_value(args: &[ArrayRef]) -> Result<ArrayRef> {
    let a = cast_args(
        args,
        &[DataType::Float64, DataType::Float64, DataType::Boolean],
        "scale_value",
    )?;
    let points = a[0].as_primitive::<Float64Type>();
    let max = a[1].as_primitive::<Float64Type>();
    let raw: &BooleanArray = a[2].as_boolean();
    let out: Float64Array = (0..points.len())
        .map(|i| {
            (!points.is_null(i) && !max.is_null(i) && !raw.is_null(i))
                .then(|| crate::scorer::scale_value(points.value(i), max.value(i), raw.value(i)))
        })
        .collect();
    Ok(Arc::new(out))
}
