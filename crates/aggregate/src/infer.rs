//! The inference tables' functions: the tests of `protospread_inference`, registered as
//! DataFusion scalar functions over the lists a grouping gathers (`array_agg` of one cell's,
//! one group's or one source's rows), so the tables are plans like the others and no row
//! becomes a Rust struct. Each function sorts what it reads before using it, so its result
//! does not depend on the order `array_agg` met the rows in (that order varies with the
//! partitioning). docs/statistics.md ("Inference") states the statistics.

use arrow::array::{
    Array, ArrayRef, AsArray, Float64Builder, Int64Builder, StringBuilder, StringViewArray,
    StructArray,
};
use arrow::datatypes::{DataType, Field, Fields, Float64Type, Int64Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use protospread_inference::{
    benjamini_hochberg, cluster_bootstrap, permutation_test, ranking, Fraction, BH_Q,
    BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

type Body = fn(&[ArrayRef]) -> Result<ArrayRef>;

/// A function of `arity` arguments of any type, returning `ret`.
struct ListUdf {
    name: &'static str,
    signature: Signature,
    ret: DataType,
    body: Body,
}

impl std::fmt::Debug for ListUdf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for ListUdf {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for ListUdf {}

impl std::hash::Hash for ListUdf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for ListUdf {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.ret.clone())
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array((self.body)(&arrays)?))
    }
}

fn udf(name: &'static str, arity: usize, ret: DataType, body: Body) -> ScalarUDF {
    ScalarUDF::from(ListUdf {
        name,
        signature: Signature::any(arity, Volatility::Immutable),
        ret,
        body,
    })
}

fn fields(f: &[(&str, DataType)]) -> Fields {
    f.iter()
        .map(|(n, t)| Field::new(*n, t.clone(), true))
        .collect::<Vec<_>>()
        .into()
}

/// A list argument of structs: the list and its struct values.
fn list_of<'a>(
    a: &'a ArrayRef,
    what: &str,
) -> Result<(&'a arrow::array::ListArray, &'a StructArray)> {
    let Some(list) = a.as_list_opt::<i32>() else {
        return exec_err!("{what}: expected a list, got {}", a.data_type());
    };
    let Some(items) = list.values().as_struct_opt() else {
        return exec_err!("{what}: expected a list of structs");
    };
    Ok((list, items))
}

/// Field `name` of `items` cast to `t`.
fn field(items: &StructArray, name: &str, t: &DataType, what: &str) -> Result<ArrayRef> {
    match items.column_by_name(name) {
        Some(c) => Ok(arrow::compute::cast(c, t)?),
        None => exec_err!("{what}: no field {name}"),
    }
}

/// The value positions of list row `row` (empty for a null list).
fn span(list: &arrow::array::ListArray, row: usize) -> std::ops::Range<usize> {
    if list.is_null(row) {
        return 0..0;
    }
    let o = list.value_offsets();
    o[row] as usize..o[row + 1] as usize
}

// ---- per cell ------------------------------------------------------------------------------

/// String field `name` of `items` as a view array: the lists' strings arrive as views, and
/// reading them as views copies no string.
fn strings(items: &StructArray, name: &str, what: &str) -> Result<StringViewArray> {
    Ok(field(items, name, &DataType::Utf8View, what)?
        .as_string_view()
        .clone())
}

/// The struct `ps_cell` returns as `t`: the permutation test's counts.
fn perm_fields() -> Fields {
    fields(&[
        ("splits", DataType::Int64),
        ("at_least", DataType::Int64),
        ("protocol_gt", DataType::Int64),
    ])
}

/// Fields of the list `sums` of [`CellUdf::cell`]: a setup (its position in byte order of the setups'
/// names), the sum of its scores and their count.
fn sums_fields() -> Fields {
    fields(&[
        ("c", DataType::Int64),
        ("s", DataType::Int64),
        ("n", DataType::Int64),
    ])
}

/// The item field of `sums`.
fn sums_item() -> Field {
    Field::new("item", DataType::Struct(sums_fields()), true)
}

/// Fields of [`CellUdf::cell`]'s struct.
fn cell_fields() -> Fields {
    fields(&[
        ("t", DataType::Struct(perm_fields())),
        ("lowest", DataType::Utf8),
        ("highest", DataType::Utf8),
        ("sums", DataType::List(Arc::new(sums_item()))),
    ])
}

/// A score's packing in the list `ps_cell` reads: position * SETUP_PACK + score, the position
/// its setup's in the study's protocol conditions, or their count for a sampling score.
/// Exact: a score is an integer from 0 to 100.
pub(crate) const SETUP_PACK: i64 = 1024;

/// `ps_cell` of one study: the names of its protocol setups, by position.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CellUdf {
    signature: Signature,
    /// The setups' names in byte order, and each position's place in that order.
    sorted: Vec<String>,
    place: Vec<usize>,
}

impl ScalarUDFImpl for CellUdf {
    fn name(&self) -> &str {
        "ps_cell"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(cell_fields()))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        Ok(ColumnarValue::Array(self.cell(&arrays)?))
    }
}

/// `ps_cell` for a study whose protocol setups are `setups`, in the order of the positions its
/// packed scores carry (see [`CellUdf::cell`]).
pub(crate) fn cell_udf(setups: &[String]) -> ScalarUDF {
    let mut by_name: Vec<usize> = (0..setups.len()).collect();
    by_name.sort_by(|&a, &b| setups[a].cmp(&setups[b]));
    let mut place = vec![0; setups.len()];
    for (k, &i) in by_name.iter().enumerate() {
        place[i] = k;
    }
    ScalarUDF::from(CellUdf {
        signature: Signature::any(1, Volatility::Immutable),
        sorted: by_name.iter().map(|&i| setups[i].clone()).collect(),
        place,
    })
}

/// The integer items of list argument `a`.
fn int_list<'a>(
    a: &'a ArrayRef,
    what: &str,
) -> Result<(&'a arrow::array::ListArray, &'a arrow::array::Int64Array)> {
    let Some(list) = a.as_list_opt::<i32>() else {
        return exec_err!("{what}: expected a list, got {}", a.data_type());
    };
    let Some(items) = list.values().as_primitive_opt::<Int64Type>() else {
        return exec_err!("{what}: expected a list of 64-bit integers");
    };
    Ok((list, items))
}

impl CellUdf {
    /// Appends the names of the setups of `one` ((place, score) pairs, sorted) whose score is
    /// `target`: each once, in byte order, space-separated; null when there is no target (no
    /// scores).
    fn append_setups_at(&self, one: &[(usize, i64)], target: Option<i64>, out: &mut StringBuilder) {
        let Some(target) = target else {
            out.append_null();
            return;
        };
        let mut last: Option<&str> = None;
        for &(c, v) in one {
            let name = self.sorted[c].as_str();
            if v == target && last != Some(name) {
                if last.is_some() {
                    out.write_char(' ').expect("writing to a string builder");
                }
                out.write_str(name).expect("writing to a string builder");
                last = Some(name);
            }
        }
        out.append_value("");
    }

    /// `ps_cell(scores)`: what the inference tables need of one cell, from the list of its
    /// protocol and sampling scores (packed with their positions, [`SETUP_PACK`]): struct {t,
    /// lowest, highest, sums}.
    /// - `t`: the exact permutation test ([`protospread_inference::permutation_test`]), struct
    ///   {splits, at_least, protocol_gt}; null when either side has fewer than two scores or
    ///   the splits exceed the limit.
    /// - `lowest`, `highest`: the setups at the cell's lowest and highest protocol score,
    ///   every tied setup once, in byte order, space-separated; null without protocol scores.
    /// - `sums`: the protocol scores summed per setup, in byte order of the setups, a list of
    ///   struct {c, s, n} (setup's place in that order, sum, count): what `ps_ranking` reads
    ///   of a cell, a row per setup instead of one per score.
    ///
    /// Each side is sorted before use, so the result does not depend on the order
    /// `array_agg` met the rows in.
    fn cell(&self, a: &[ArrayRef]) -> Result<ArrayRef> {
        let what = "ps_cell";
        let (pl, pv) = int_list(&a[0], what)?;
        let sampling = self.place.len() as i64;
        let mut t = [
            Int64Builder::new(),
            Int64Builder::new(),
            Int64Builder::new(),
        ];
        let mut valid = Vec::with_capacity(pl.len());
        let (mut lowest, mut highest) = (StringBuilder::new(), StringBuilder::new());
        let (mut places, mut sums, mut counts) = (
            Int64Builder::new(),
            Int64Builder::new(),
            Int64Builder::new(),
        );
        let (mut offsets, mut len) = (vec![0i32], 0i32);
        let (mut p, mut s, mut one) = (Vec::new(), Vec::new(), Vec::<(usize, i64)>::new());
        for row in 0..pl.len() {
            p.clear();
            s.clear();
            one.clear();
            for k in span(pl, row).filter(|&k| pv.is_valid(k)) {
                let packed = pv.value(k);
                let (setup, v) = (packed.div_euclid(SETUP_PACK), packed.rem_euclid(SETUP_PACK));
                if setup == sampling {
                    s.push(v);
                    continue;
                }
                let Some(&place) = usize::try_from(setup).ok().and_then(|i| self.place.get(i))
                else {
                    return exec_err!("{what}: packed score {packed} names no setup");
                };
                p.push(v);
                one.push((place, v));
            }
            p.sort_unstable();
            s.sort_unstable();
            match permutation_test(&p, &s) {
                Ok(r) => {
                    for (c, v) in t.iter_mut().zip([r.splits, r.at_least, r.protocol_gt]) {
                        c.append_value(v as i64);
                    }
                    valid.push(true);
                }
                Err(_) => {
                    t.iter_mut().for_each(Int64Builder::append_null);
                    valid.push(false);
                }
            }
            one.sort_unstable();
            self.append_setups_at(&one, p.first().copied(), &mut lowest);
            self.append_setups_at(&one, p.last().copied(), &mut highest);
            for run in one.chunk_by(|x, y| x.0 == y.0) {
                places.append_value(run[0].0 as i64);
                sums.append_value(run.iter().map(|x| x.1).sum());
                counts.append_value(run.len() as i64);
                len += 1;
            }
            offsets.push(len);
        }
        let t: Vec<ArrayRef> = t
            .iter_mut()
            .map(|c| Arc::new(c.finish()) as ArrayRef)
            .collect();
        let t = StructArray::try_new(perm_fields(), t, Some(valid.into()))?;
        let values = StructArray::try_new(
            sums_fields(),
            vec![
                Arc::new(places.finish()) as ArrayRef,
                Arc::new(sums.finish()),
                Arc::new(counts.finish()),
            ],
            None,
        )?;
        let sums = arrow::array::ListArray::try_new(
            Arc::new(sums_item()),
            arrow::buffer::OffsetBuffer::new(offsets.into()),
            Arc::new(values),
            None,
        )?;
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(t),
            Arc::new(lowest.finish()),
            Arc::new(highest.finish()),
            Arc::new(sums),
        ];
        Ok(Arc::new(StructArray::try_new(cell_fields(), arrays, None)?))
    }
}

// ---- per group -----------------------------------------------------------------------------

/// `ps_bh(list)`: Benjamini-Hochberg at q = 0.05 over the p-values of a family, from
/// `array_agg(named_struct('a', at_least, 'n', splits))` (p = a / n, exact): struct {count,
/// cut_a, cut_n}, the number rejected and the largest rejected p-value (null when none).
fn bh(a: &[ArrayRef]) -> Result<ArrayRef> {
    let what = "ps_bh";
    let (list, items) = list_of(&a[0], what)?;
    let at = field(items, "a", &DataType::Int64, what)?;
    let n = field(items, "n", &DataType::Int64, what)?;
    let (at, n) = (
        at.as_primitive::<Int64Type>(),
        n.as_primitive::<Int64Type>(),
    );
    let mut cols = [
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    ];
    for row in 0..list.len() {
        let mut p: Vec<Fraction> = span(list, row)
            .filter(|&k| at.is_valid(k) && n.is_valid(k) && n.value(k) > 0)
            .map(|k| Fraction::new(at.value(k) as u64, n.value(k) as u64))
            .collect();
        p.sort();
        let r = benjamini_hochberg(&p, BH_Q);
        cols[0].append_value(r.count as i64);
        match r.cutoff {
            Some(c) => {
                cols[1].append_value(c.num as i64);
                cols[2].append_value(c.den as i64);
            }
            None => {
                cols[1].append_null();
                cols[2].append_null();
            }
        }
    }
    let f = fields(&[
        ("count", DataType::Int64),
        ("cut_a", DataType::Int64),
        ("cut_n", DataType::Int64),
    ]);
    let arrays: Vec<ArrayRef> = cols
        .iter_mut()
        .map(|c| Arc::new(c.finish()) as ArrayRef)
        .collect();
    Ok(Arc::new(StructArray::try_new(f, arrays, None)?))
}

/// Fields of [`headline`]'s struct.
fn headline_fields() -> Fields {
    fields(&[
        ("models", DataType::Int64),
        ("share", DataType::Float64),
        ("share_low", DataType::Float64),
        ("share_high", DataType::Float64),
        ("median_ratio", DataType::Float64),
        ("median_ratio_low", DataType::Float64),
        ("median_ratio_high", DataType::Float64),
        ("null_expected_share", DataType::Float64),
        ("replicates", DataType::Int64),
    ])
}

/// `ps_headline(list)`: the headline statistics of a source's cells with their cluster
/// bootstrap intervals, from `array_agg(named_struct('model', model, 'gt',
/// protocol_gt_sampling, 'ratio', ratio, 'null_gt', protocol_gt, 'splits', splits))`. Models
/// are numbered in byte order of their ids; the null-expected share is the mean over compared
/// cells of null_gt / splits, summed in ascending order of the terms.
fn headline(a: &[ArrayRef]) -> Result<ArrayRef> {
    let what = "ps_headline";
    let (list, items) = list_of(&a[0], what)?;
    let model = strings(items, "model", what)?;
    let gt = field(items, "gt", &DataType::Boolean, what)?;
    let ratio = field(items, "ratio", &DataType::Float64, what)?;
    let null_gt = field(items, "null_gt", &DataType::Int64, what)?;
    let splits = field(items, "splits", &DataType::Int64, what)?;
    let gt = gt.as_boolean();
    let ratio = ratio.as_primitive::<Float64Type>();
    let (null_gt, splits) = (
        null_gt.as_primitive::<Int64Type>(),
        splits.as_primitive::<Int64Type>(),
    );
    let f = headline_fields();
    let mut ints = [Int64Builder::new(), Int64Builder::new()];
    let mut floats: Vec<Float64Builder> = (0..7).map(|_| Float64Builder::new()).collect();
    for row in 0..list.len() {
        let ks: Vec<usize> = span(list, row).filter(|&k| model.is_valid(k)).collect();
        let ids: BTreeMap<&str, usize> = {
            let mut m: Vec<&str> = ks.iter().map(|&k| model.value(k)).collect();
            m.sort_unstable();
            m.dedup();
            m.into_iter().enumerate().map(|(i, s)| (s, i)).collect()
        };
        let cluster: Vec<usize> = ks.iter().map(|&k| ids[model.value(k)]).collect();
        let g: Vec<Option<bool>> = ks
            .iter()
            .map(|&k| gt.is_valid(k).then(|| gt.value(k)))
            .collect();
        let r: Vec<Option<f64>> = ks
            .iter()
            .map(|&k| ratio.is_valid(k).then(|| ratio.value(k)))
            .collect();
        let h = cluster_bootstrap(
            ids.len(),
            &cluster,
            &g,
            &r,
            BOOTSTRAP_REPLICATES,
            BOOTSTRAP_SEED,
        )
        .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let mut terms: Vec<f64> = ks
            .iter()
            .filter(|&&k| gt.is_valid(k) && null_gt.is_valid(k) && splits.is_valid(k))
            .map(|&k| null_gt.value(k) as f64 / splits.value(k) as f64)
            .collect();
        terms.sort_by(f64::total_cmp);
        let null_share =
            (!terms.is_empty()).then(|| terms.iter().sum::<f64>() / terms.len() as f64);
        ints[0].append_value(ids.len() as i64);
        ints[1].append_value(h.share.replicates.min(h.median_ratio.replicates) as i64);
        for (b, v) in floats.iter_mut().zip([
            h.share.estimate,
            h.share.low,
            h.share.high,
            h.median_ratio.estimate,
            h.median_ratio.low,
            h.median_ratio.high,
            null_share,
        ]) {
            b.append_option(v);
        }
    }
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(ints[0].finish())];
    arrays.extend(floats.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    arrays.push(Arc::new(ints[1].finish()));
    Ok(Arc::new(StructArray::try_new(f, arrays, None)?))
}

/// Fields of [`rank`]'s struct.
fn ranking_fields() -> Fields {
    fields(&[
        ("setups", DataType::Int64),
        ("models", DataType::Int64),
        ("setup_pairs", DataType::Int64),
        ("tau_median", DataType::Float64),
        ("tau_min", DataType::Float64),
        ("model_pairs", DataType::Int64),
        ("flipped_pairs", DataType::Int64),
        ("leaders", DataType::Int64),
        ("leading_models", DataType::Utf8),
    ])
}

/// `ps_ranking(list)`: ranking robustness of one scale from `array_agg(named_struct('model',
/// model, 'pl', pl))` over its kept cells, `pl` a cell's protocol sums per setup (`sums` of
/// [`CellUdf::cell`]): a model's score under a setup is the mean of
/// its scores there (an exact fraction); setups in byte order; models in byte order, only
/// those with a score under every setup.
fn rank(a: &[ArrayRef]) -> Result<ArrayRef> {
    let what = "ps_ranking";
    let (list, items) = list_of(&a[0], what)?;
    let model = strings(items, "model", what)?;
    let Some(pl) = items.column_by_name("pl") else {
        return exec_err!("{what}: no field pl");
    };
    let (pl, sums_of) = list_of(pl, what)?;
    let c = field(sums_of, "c", &DataType::Int64, what)?;
    let s = field(sums_of, "s", &DataType::Int64, what)?;
    let n = field(sums_of, "n", &DataType::Int64, what)?;
    let (c, s, n) = (
        c.as_primitive::<Int64Type>(),
        s.as_primitive::<Int64Type>(),
        n.as_primitive::<Int64Type>(),
    );
    let mut ints: Vec<Int64Builder> = (0..6).map(|_| Int64Builder::new()).collect();
    let mut floats = [Float64Builder::new(), Float64Builder::new()];
    let mut leaders = StringBuilder::new();
    for row in 0..list.len() {
        // ((model, setup), (sum, count)): each cell's scores, summed per setup.
        type Run<'a> = ((&'a str, i64), (u64, u64));
        let mut cells: Vec<usize> = span(list, row).filter(|&k| model.is_valid(k)).collect();
        cells.sort_unstable_by(|&x, &y| model.value(x).cmp(model.value(y)));
        let mut acc: Vec<Run> = Vec::new();
        for &k in &cells {
            let m = model.value(k);
            // A cell's sums come in byte order of their setups (`ps_cell`).
            for j in span(pl, k).filter(|&j| c.is_valid(j) && s.is_valid(j) && n.is_valid(j)) {
                let (setup, x, count) = (c.value(j), s.value(j) as u64, n.value(j) as u64);
                match acc.last_mut() {
                    Some((key, (sum, total))) if *key == (m, setup) => {
                        *sum += x;
                        *total += count;
                    }
                    _ => acc.push(((m, setup), (x, count))),
                }
            }
        }
        let mut setups: Vec<i64> = acc.iter().map(|(k, _)| k.1).collect();
        setups.sort_unstable();
        setups.dedup();
        // Models with a score under every setup (acc is sorted by model, then setup).
        let mut models: Vec<&str> = Vec::new();
        let mut starts: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < acc.len() {
            let m = acc[i].0 .0;
            let j = i + acc[i..].iter().take_while(|(k, _)| k.0 == m).count();
            if acc[i..j]
                .iter()
                .map(|(k, _)| k.1)
                .eq(setups.iter().copied())
            {
                starts.push(i);
                models.push(m);
            }
            i = j;
        }
        // A kept model's runs cover every setup in order: setup k is at its start + k.
        let scores: Vec<Vec<Fraction>> = (0..setups.len())
            .map(|k| {
                starts
                    .iter()
                    .map(|&i| {
                        let (sum, n) = acc[i + k].1;
                        Fraction::new(sum, n)
                    })
                    .collect()
            })
            .collect();
        let r = ranking(&scores)
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let lead: Vec<&str> = models
            .iter()
            .zip(&r.can_lead)
            .filter(|(_, l)| **l)
            .map(|(m, _)| *m)
            .collect();
        for (b, x) in ints.iter_mut().zip([
            r.setups as i64,
            r.models as i64,
            r.setup_pairs as i64,
            r.model_pairs as i64,
            r.flipped_pairs as i64,
            lead.len() as i64,
        ]) {
            b.append_value(x);
        }
        floats[0].append_option(r.tau_median);
        floats[1].append_option(r.tau_min);
        leaders.append_value(lead.join(" "));
    }
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(ints[0].finish()),
        Arc::new(ints[1].finish()),
        Arc::new(ints[2].finish()),
        Arc::new(floats[0].finish()),
        Arc::new(floats[1].finish()),
        Arc::new(ints[3].finish()),
        Arc::new(ints[4].finish()),
        Arc::new(ints[5].finish()),
        Arc::new(leaders.finish()),
    ];
    Ok(Arc::new(StructArray::try_new(
        ranking_fields(),
        arrays,
        None,
    )?))
}

/// The functions that do not depend on the study, ready to register: `ps_bh`, `ps_headline`,
/// `ps_ranking` (`ps_cell` is [`cell_udf`]).
pub(crate) fn udfs() -> Vec<ScalarUDF> {
    let bh_t = DataType::Struct(fields(&[
        ("count", DataType::Int64),
        ("cut_a", DataType::Int64),
        ("cut_n", DataType::Int64),
    ]));
    vec![
        udf("ps_bh", 1, bh_t, bh),
        udf(
            "ps_headline",
            1,
            DataType::Struct(headline_fields()),
            headline,
        ),
        udf("ps_ranking", 1, DataType::Struct(ranking_fields()), rank),
    ]
}
