//! `norm_z` / `norm_percentile(test, dimension, value)`: a value placed in the human norms.

use crate::kernels::{cast_args, Texts};
use crate::norms::{Norm, Norms};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Builder};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{ScalarUDF, Signature, Volatility};
use protospread_engine::{array_udf, ArrayFunction, ByAddress};
use std::sync::Arc;

/// The function `name` (`norm_z` or `norm_percentile`) over `norms`, ready to register.
pub(super) fn udf(name: &'static str, norms: Arc<Norms>) -> ScalarUDF {
    let f = NormFn {
        name,
        norms: ByAddress(norms),
    };
    array_udf(f, Signature::any(3, Volatility::Immutable))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct NormFn {
    name: &'static str,
    norms: ByAddress<Norms>,
}

impl ArrayFunction for NormFn {
    fn name(&self) -> &str {
        self.name
    }
    fn return_type(&self) -> DataType {
        DataType::Float64
    }
    fn invoke(&self, args: &[ArrayRef]) -> Result<ArrayRef> {
        let types = [DataType::Utf8, DataType::Utf8, DataType::Float64];
        let a = cast_args(args, &types, self.name)?;
        let (test, dim) = (Texts::new(&a[0]), Texts::new(&a[1]));
        let v = a[2].as_primitive::<Float64Type>();
        let mut out = Float64Builder::with_capacity(v.len());
        // The norms of the last test seen by dimension: rows come an administration at a time
        // (one test, its dimensions in turn), and `Norms::get` builds its key's strings.
        let mut of_test: Option<(&str, Vec<(&str, &Norm)>)> = None;
        for i in 0..v.len() {
            let x = if test.is_null(i) || dim.is_null(i) || v.is_null(i) {
                None
            } else {
                let t = test.value(i);
                if of_test.as_ref().is_none_or(|(k, _)| *k != t) {
                    of_test = Some((t, self.norms.of_test(t).collect()));
                }
                let d = dim.value(i);
                of_test
                    .as_ref()
                    .and_then(|(_, dims)| dims.iter().find(|(k, _)| *k == d))
                    .map(|(_, nm)| match self.name {
                        "norm_z" => nm.z(v.value(i)),
                        _ => nm.percentile(v.value(i)),
                    })
                    .filter(|x| x.is_finite())
            };
            out.append_option(x);
        }
        Ok(Arc::new(out.finish()))
    }
}
