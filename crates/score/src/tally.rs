//! The administration's tallies as DataFusion aggregate functions: each request's readings
//! ([`crate::kernels`]) scored with the key and summed per group where they are read, in one
//! accumulator per group instead of a struct per request and a sum per field.
//!
//! | SQL aggregate | returns |
//! |---|---|
//! | `strict_administration(test, mode, item, reply, failed, option_order, item_order)`, `lenient_administration` | struct `{constant_answers, per_dim}`: whether at least two items were read `ok` and all with one option; per dimension slot (the `ix` of the key tables, in slot order) the items read `ok` that the key scores and their points, as a list of struct `{ix, n, p}` |
//! | `request_counts(rule, reply, failed, item_order)` | struct `{requests, failed_requests, readable_replies, items, failed_items, readable_items}` (Int64): the requests of the group, those failed and those whose every shown position `rule` reads `ok`; the positions shown (1 per single-item request), those of failed requests and those read `ok` |
//!
//! Only readings `ok` of items the key scores count, and only their options enter the
//! constant-answer flag. Points are integer-valued, so their sums are exact in any order;
//! counts are integers. Both accumulators keep every group's state in flat vectors, and
//! their partial states (for a plan that aggregates in two phases) are the same sums.

use crate::kernels::{
    reading, reply_arg_types, request_readings, shown_items, slot_fields, text_or_cast, value,
    ItemPoints, KeyPoints, ReplyArgs, Texts,
};
use crate::rules::{Reading, ReplyRule, Status};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, ListArray,
    StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::Int64Type;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Fields, Float64Type, Int32Type};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};
use std::sync::Arc;

/// Every aggregate function of this module, ready to register on a session.
pub(crate) fn udafs(key: Arc<KeyPoints>) -> Vec<AggregateUDF> {
    vec![
        AggregateUDF::from(Administration::new(ReplyRule::Strict, key.clone())),
        AggregateUDF::from(Administration::new(ReplyRule::Lenient, key)),
        AggregateUDF::from(RequestCounts::new()),
    ]
}

/// The arguments as arrays of the types the accumulators read: texts as they come when they
/// are plain UTF-8 or string views (read in place by [`Texts`]), anything else cast.
fn cast_all(values: &[ArrayRef], types: &[DataType], name: &str) -> Result<Vec<ArrayRef>> {
    if values.len() != types.len() {
        return exec_err!(
            "{name}: expected {} arguments, got {}",
            types.len(),
            values.len()
        );
    }
    values
        .iter()
        .zip(types)
        .map(|(a, t)| text_or_cast(a, t))
        .collect()
}

/// Which rows of a batch count: all, or those `opt_filter` (a `FILTER (WHERE ...)`) keeps.
fn counted(opt_filter: Option<&BooleanArray>, i: usize) -> bool {
    opt_filter.is_none_or(|f| f.is_valid(i) && f.value(i))
}

/// The fields of the administration's struct.
fn administration_fields() -> Fields {
    Fields::from(vec![
        Field::new("constant_answers", DataType::Boolean, false),
        Field::new(
            "per_dim",
            DataType::new_list(DataType::Struct(slot_fields()), true),
            false,
        ),
    ])
}

/// `strict_administration(...)` and `lenient_administration(...)`: see the module table.
#[derive(Debug)]
struct Administration {
    rule: ReplyRule,
    key: Arc<KeyPoints>,
    signature: Signature,
}

impl Administration {
    fn new(rule: ReplyRule, key: Arc<KeyPoints>) -> Self {
        Administration {
            rule,
            key,
            signature: Signature::any(7, Volatility::Immutable),
        }
    }

    fn groups(&self) -> AdministrationGroups {
        AdministrationGroups::new(self.rule, self.name(), self.key.clone())
    }
}

impl PartialEq for Administration {
    fn eq(&self, other: &Self) -> bool {
        self.rule == other.rule && Arc::ptr_eq(&self.key, &other.key)
    }
}
impl Eq for Administration {}
impl std::hash::Hash for Administration {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rule.hash(state);
        Arc::as_ptr(&self.key).hash(state);
    }
}

impl AggregateUDFImpl for Administration {
    fn name(&self) -> &str {
        match self.rule {
            ReplyRule::Strict => "strict_administration",
            ReplyRule::Lenient => "lenient_administration",
        }
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(administration_fields()))
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneGroup(self.groups())))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let mut f = vec![
            Field::new(
                format_state_name(args.name, "opt_n"),
                DataType::Int64,
                false,
            ),
            Field::new(
                format_state_name(args.name, "opt_min"),
                DataType::Int32,
                true,
            ),
            Field::new(
                format_state_name(args.name, "opt_max"),
                DataType::Int32,
                true,
            ),
        ];
        for i in 0..self.key.slots() {
            let n = format_state_name(args.name, &format!("n_{i}"));
            let p = format_state_name(args.name, &format!("p_{i}"));
            f.push(Field::new(n, DataType::Int64, false));
            f.push(Field::new(p, DataType::Float64, false));
        }
        Ok(f.into_iter().map(Arc::new).collect())
    }
    fn groups_accumulator_supported(&self, _: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(self.groups()))
    }
}

/// The state of every group of an [`Administration`]: the options read (count, least,
/// greatest) and per group and slot (`g * slots + ix`) the items counted and their points.
struct AdministrationGroups {
    rule: ReplyRule,
    name: String,
    key: Arc<KeyPoints>,
    slots: usize,
    opt_n: Vec<i64>,
    opt_min: Vec<Option<i32>>,
    opt_max: Vec<Option<i32>>,
    n: Vec<i64>,
    p: Vec<f64>,
}

impl AdministrationGroups {
    /// No groups yet.
    fn new(rule: ReplyRule, name: &str, key: Arc<KeyPoints>) -> Self {
        AdministrationGroups {
            rule,
            name: name.to_string(),
            slots: key.slots(),
            key,
            opt_n: Vec::new(),
            opt_min: Vec::new(),
            opt_max: Vec::new(),
            n: Vec::new(),
            p: Vec::new(),
        }
    }

    fn resize(&mut self, groups: usize) {
        self.opt_n.resize(groups, 0);
        self.opt_min.resize(groups, None);
        self.opt_max.resize(groups, None);
        self.n.resize(groups * self.slots, 0);
        self.p.resize(groups * self.slots, 0.0);
    }

    fn add_option(&mut self, g: usize, n: i64, min: Option<i32>, max: Option<i32>) {
        self.opt_n[g] += n;
        if let Some(m) = min {
            self.opt_min[g] = Some(self.opt_min[g].map_or(m, |x| x.min(m)));
        }
        if let Some(m) = max {
            self.opt_max[g] = Some(self.opt_max[g].map_or(m, |x| x.max(m)));
        }
    }

    /// The first groups' per-slot state, taken out.
    fn take_slots(&mut self, emit_to: EmitTo) -> (Vec<i64>, Vec<f64>) {
        match emit_to {
            EmitTo::All => (std::mem::take(&mut self.n), std::mem::take(&mut self.p)),
            EmitTo::First(k) => {
                let at = k * self.slots;
                let n_rest = self.n.split_off(at);
                let p_rest = self.p.split_off(at);
                (
                    std::mem::replace(&mut self.n, n_rest),
                    std::mem::replace(&mut self.p, p_rest),
                )
            }
        }
    }
}

impl GroupsAccumulator for AdministrationGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let mut types = vec![DataType::Utf8];
        types.extend(reply_arg_types());
        let a = cast_all(values, &types, &self.name)?;
        let (test, request) = (Texts::new(&a[0]), ReplyArgs::of(&a[1..]));
        self.resize(total_num_groups);
        let key = self.key.clone();
        let mut shown: Vec<(i32, Option<i32>, Reading)> = Vec::new();
        let mut keyed: Option<(&str, &ItemPoints)> = None;
        for (i, &g) in group_indices.iter().enumerate() {
            if !counted(opt_filter, i) {
                continue;
            }
            let oo = request_readings(self.rule, &self.name, i, &request, &mut shown)?;
            if test.is_null(i) {
                return exec_err!("{}: null test in row {i}", self.name);
            }
            let t = test.value(i);
            let items = match keyed {
                Some((k, items)) if k == t => items,
                _ => match key.items(t) {
                    Some(items) => {
                        keyed = Some((t, items));
                        items
                    }
                    None => return exec_err!("{}: test {t:?} is not in the key", self.name),
                },
            };
            // A request's points are summed from 0 in item order, then added to its group's.
            let base = g * self.slots;
            let (mut on, mut omin, mut omax) = (0i64, None::<i32>, None::<i32>);
            let mut request_points = [0.0f64; 16];
            let mut many = Vec::new();
            let points_of: &mut [f64] = if self.slots <= request_points.len() {
                &mut request_points[..self.slots]
            } else {
                many.resize(self.slots, 0.0);
                &mut many
            };
            for (it, _, r) in &shown {
                let Some(v) = value(r, oo) else { continue };
                let Some(Some((ix, points))) = usize::try_from(*it).ok().and_then(|x| items.get(x))
                else {
                    continue;
                };
                self.n[base + ix] += 1;
                points_of[*ix] += points[v as usize];
                if let Some(o) = r.option {
                    on += 1;
                    omin = Some(omin.map_or(o, |m| m.min(o)));
                    omax = Some(omax.map_or(o, |m| m.max(o)));
                }
            }
            for (s, x) in points_of.iter().enumerate() {
                self.p[base + s] += x;
            }
            self.add_option(g, on, omin, omax);
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let opt_n = emit_to.take_needed(&mut self.opt_n);
        let opt_min = emit_to.take_needed(&mut self.opt_min);
        let opt_max = emit_to.take_needed(&mut self.opt_max);
        let (n, p) = self.take_slots(emit_to);
        let groups = opt_n.len();
        let constant: BooleanArray = (0..groups)
            .map(|g| Some(opt_n[g] >= 2 && opt_min[g].is_some() && opt_min[g] == opt_max[g]))
            .collect();
        let ix: Int32Array = (0..groups * self.slots)
            .map(|k| (k % self.slots) as i32)
            .collect();
        let fields = slot_fields();
        let per_slot = StructArray::try_new(
            fields.clone(),
            vec![
                Arc::new(ix),
                Arc::new(Int64Array::from(n)),
                Arc::new(Float64Array::from(p)),
            ],
            None,
        )?;
        let per_dim = ListArray::try_new(
            Arc::new(Field::new_list_field(DataType::Struct(fields), true)),
            OffsetBuffer::from_lengths(std::iter::repeat_n(self.slots, groups)),
            Arc::new(per_slot),
            None,
        )?;
        let s = StructArray::try_new(
            administration_fields(),
            vec![Arc::new(constant), Arc::new(per_dim)],
            None,
        )?;
        Ok(Arc::new(s))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let opt_n = emit_to.take_needed(&mut self.opt_n);
        let opt_min = emit_to.take_needed(&mut self.opt_min);
        let opt_max = emit_to.take_needed(&mut self.opt_max);
        let (n, p) = self.take_slots(emit_to);
        let groups = opt_n.len();
        let mut out: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(opt_n)),
            Arc::new(Int32Array::from(opt_min)),
            Arc::new(Int32Array::from(opt_max)),
        ];
        for s in 0..self.slots {
            let at = |g: usize| g * self.slots + s;
            out.push(Arc::new(Int64Array::from_iter_values(
                (0..groups).map(|g| n[at(g)]),
            )));
            out.push(Arc::new(Float64Array::from_iter_values(
                (0..groups).map(|g| p[at(g)]),
            )));
        }
        Ok(out)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        if values.len() != 3 + 2 * self.slots {
            return exec_err!("{}: a partial state of {} columns", self.name, values.len());
        }
        self.resize(total_num_groups);
        let on = values[0].as_primitive::<Int64Type>();
        let (omin, omax) = (
            values[1].as_primitive::<Int32Type>(),
            values[2].as_primitive::<Int32Type>(),
        );
        for (i, &g) in group_indices.iter().enumerate() {
            let opt = |a: &Int32Array| a.is_valid(i).then(|| a.value(i));
            self.add_option(g, on.value(i), opt(omin), opt(omax));
            for s in 0..self.slots {
                self.n[g * self.slots + s] +=
                    values[3 + 2 * s].as_primitive::<Int64Type>().value(i);
                self.p[g * self.slots + s] +=
                    values[4 + 2 * s].as_primitive::<Float64Type>().value(i);
            }
        }
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let mut each = AdministrationGroups::new(self.rule, &self.name, self.key.clone());
        each_row_a_group(&mut each, values, opt_filter)
    }

    fn size(&self) -> usize {
        self.opt_n.capacity() * 8
            + self.opt_min.capacity() * 8
            + self.opt_max.capacity() * 8
            + self.n.capacity() * 8
            + self.p.capacity() * 8
    }
}

/// The fields of `request_counts`.
fn count_fields() -> Fields {
    Fields::from(
        [
            "requests",
            "failed_requests",
            "readable_replies",
            "items",
            "failed_items",
            "readable_items",
        ]
        .map(|n| Field::new(n, DataType::Int64, false))
        .to_vec(),
    )
}

/// `request_counts(rule, reply, failed, item_order)`: see the module table.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RequestCounts {
    signature: Signature,
}

impl RequestCounts {
    fn new() -> Self {
        RequestCounts {
            signature: Signature::any(4, Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for RequestCounts {
    fn name(&self) -> &str {
        "request_counts"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Struct(count_fields()))
    }
    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneGroup(CountGroups::default())))
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(count_fields()
            .iter()
            .map(|f| {
                Arc::new(Field::new(
                    format_state_name(args.name, f.name()),
                    DataType::Int64,
                    false,
                ))
            })
            .collect())
    }
    fn groups_accumulator_supported(&self, _: AccumulatorArgs) -> bool {
        true
    }
    fn create_groups_accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(CountGroups::default()))
    }
}

/// The six counts of every group, each group's in `6 * g .. 6 * g + 6` (the order of
/// [`count_fields`]).
#[derive(Default)]
struct CountGroups {
    counts: Vec<i64>,
}

const COUNTS: usize = 6;

impl CountGroups {
    fn take_counts(&mut self, emit_to: EmitTo) -> Vec<i64> {
        match emit_to {
            EmitTo::All => std::mem::take(&mut self.counts),
            EmitTo::First(k) => {
                let rest = self.counts.split_off(k * COUNTS);
                std::mem::replace(&mut self.counts, rest)
            }
        }
    }

    fn columns(&mut self, emit_to: EmitTo) -> Vec<ArrayRef> {
        let counts = self.take_counts(emit_to);
        (0..COUNTS)
            .map(|c| {
                Arc::new(Int64Array::from_iter_values(
                    counts.iter().skip(c).step_by(COUNTS).copied(),
                )) as ArrayRef
            })
            .collect()
    }
}

impl GroupsAccumulator for CountGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let types = [
            DataType::Utf8,
            DataType::Utf8,
            DataType::Boolean,
            DataType::Utf8,
        ];
        let a = cast_all(values, &types, "request_counts")?;
        let (rule, reply, failed, item_order) = (
            Texts::new(&a[0]),
            Texts::new(&a[1]),
            a[2].as_boolean(),
            Texts::new(&a[3]),
        );
        self.counts.resize(total_num_groups * COUNTS, 0);
        let mut last_rule: Option<(&str, ReplyRule)> = None;
        for (i, &g) in group_indices.iter().enumerate() {
            if !counted(opt_filter, i) {
                continue;
            }
            if rule.is_null(i) || reply.is_null(i) || failed.is_null(i) {
                return exec_err!("request_counts: null argument in row {i}");
            }
            let r = match last_rule {
                Some((name, r)) if name == rule.value(i) => r,
                _ => match ReplyRule::parse(rule.value(i)) {
                    Some(r) => {
                        last_rule = Some((rule.value(i), r));
                        r
                    }
                    None => {
                        return exec_err!("request_counts: unknown reply rule {:?}", rule.value(i))
                    }
                },
            };
            let is_failed = failed.value(i);
            // Counted without a vector of readings per request; a failed request's items
            // all have `reading`'s failed reading.
            let failed_ok = || usize::from(reading(r, "", true).status == Status::Ok);
            let (shown, ok) = match (is_failed, item_order.is_null(i)) {
                (true, true) => (1, failed_ok()),
                (true, false) => {
                    let n = shown_items(item_order.value(i))?.len();
                    (n, n * failed_ok())
                }
                (false, true) => (
                    1,
                    usize::from(r.read_single(reply.value(i)).status == Status::Ok),
                ),
                (false, false) => {
                    let readings =
                        r.read_whole(reply.value(i), shown_items(item_order.value(i))?.len());
                    let ok = readings.iter().filter(|x| x.status == Status::Ok).count();
                    (readings.len(), ok)
                }
            };
            let (shown, ok) = (shown as i64, ok as i64);
            let c = &mut self.counts[g * COUNTS..g * COUNTS + COUNTS];
            c[0] += 1;
            c[3] += shown;
            c[5] += ok;
            if is_failed {
                c[1] += 1;
                c[4] += shown;
            } else if ok == shown {
                c[2] += 1;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let cols = self.columns(emit_to);
        Ok(Arc::new(StructArray::try_new(count_fields(), cols, None)?))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(self.columns(emit_to))
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        if values.len() != COUNTS {
            return exec_err!(
                "request_counts: a partial state of {} columns",
                values.len()
            );
        }
        self.counts.resize(total_num_groups * COUNTS, 0);
        let cols: Vec<&Int64Array> = values.iter().map(|v| v.as_primitive()).collect();
        for (i, &g) in group_indices.iter().enumerate() {
            for (c, col) in cols.iter().enumerate() {
                self.counts[g * COUNTS + c] += col.value(i);
            }
        }
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        each_row_a_group(&mut CountGroups::default(), values, opt_filter)
    }

    fn size(&self) -> usize {
        self.counts.capacity() * 8
    }
}

/// The partial state of each row as a group of its own (`convert_to_state`), from an empty
/// accumulator `each`: a row the filter drops is a group with no rows.
fn each_row_a_group<G: GroupsAccumulator>(
    each: &mut G,
    values: &[ArrayRef],
    opt_filter: Option<&BooleanArray>,
) -> Result<Vec<ArrayRef>> {
    let n = values.first().map_or(0, |v| v.len());
    let groups: Vec<usize> = (0..n).collect();
    each.update_batch(values, &groups, opt_filter, n)?;
    each.state(EmitTo::All)
}

/// A groups accumulator that can make room for groups with no rows yet.
trait Grow: GroupsAccumulator + Sync {
    fn grow(&mut self, groups: usize);
}

impl Grow for AdministrationGroups {
    fn grow(&mut self, groups: usize) {
        self.resize(groups);
    }
}

impl Grow for CountGroups {
    fn grow(&mut self, groups: usize) {
        self.counts.resize(groups * COUNTS, 0);
    }
}

/// A groups accumulator as the plain accumulator of one group (a query without GROUP BY;
/// the plans here always group). Evaluating or taking the state hands the group's state out.
struct OneGroup<G: Grow>(G);

impl<G: Grow> std::fmt::Debug for OneGroup<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneGroup")
    }
}

impl<G: Grow> Accumulator for OneGroup<G> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let n = values.first().map_or(0, |v| v.len());
        self.0.update_batch(values, &vec![0; n], None, 1)
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.0.grow(1);
        ScalarValue::try_from_array(&self.0.evaluate(EmitTo::All)?, 0)
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.0.grow(1);
        self.0
            .state(EmitTo::All)?
            .iter()
            .map(|a| ScalarValue::try_from_array(a, 0))
            .collect()
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let n = states.first().map_or(0, |v| v.len());
        self.0.merge_batch(states, &vec![0; n], 1)
    }
}

#[cfg(test)]
mod tests {
    //! The plans run these on one partition, grouping sorted input: only `update_batch` and
    //! `evaluate(All)` or `evaluate(First)` run there. A plan on more partitions merges
    //! partial states, or skips the partial grouping (`convert_to_state`); each path must give
    //! what one accumulator over all rows gives.
    use super::*;
    use datafusion::arrow::array::{BooleanArray, Int32Array, StringArray};
    use std::path::PathBuf;

    fn key() -> Arc<KeyPoints> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/scoring_key.csv");
        let key = crate::ScoringKey::load(&path).expect("the repository's key");
        Arc::new(KeyPoints::new(&key))
    }

    /// Requests of dark_triad: single items 1..=18 with replies of every kind (one failed),
    /// then whole-test requests in three shown orders. Arguments of the administration
    /// aggregate.
    fn requests() -> Vec<ArrayRef> {
        let replies = [
            "1", "2", "3", "4", "5", "x", "", "3", "3", "5", "1", "2", "4", "0",
        ];
        let mut mode = Vec::new();
        let mut item = Vec::new();
        let mut reply = Vec::new();
        let mut failed = Vec::new();
        let mut order = Vec::new();
        let mut item_order = Vec::new();
        for i in 1..=18 {
            mode.push("single");
            item.push(Some(i));
            reply.push(replies[i as usize % replies.len()].to_string());
            failed.push(i == 7);
            order.push(if i % 2 == 0 { "human" } else { "reversed" });
            item_order.push(None);
        }
        let shown: Vec<String> = (1..=18).map(|i| i.to_string()).collect();
        let mut backwards = shown.clone();
        backwards.reverse();
        for (k, o) in [&shown, &backwards, &shown].into_iter().enumerate() {
            mode.push("whole");
            item.push(None);
            reply.push(
                (1..=18)
                    .filter(|p| p % (k + 2) != 0)
                    .map(|p| format!("{p}: {}", 1 + (p * (k + 1)) % 5))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
            failed.push(false);
            order.push("human");
            item_order.push(Some(o.join(";")));
        }
        vec![
            Arc::new(StringArray::from(vec!["dark_triad"; mode.len()])),
            Arc::new(StringArray::from(mode)),
            Arc::new(Int32Array::from(item)),
            Arc::new(StringArray::from(reply)),
            Arc::new(BooleanArray::from(failed)),
            Arc::new(StringArray::from(order)),
            Arc::new(StringArray::from(item_order)),
        ]
    }

    fn administration() -> AdministrationGroups {
        Administration::new(ReplyRule::Strict, key()).groups()
    }

    fn rows(values: &[ArrayRef], at: usize, len: usize) -> Vec<ArrayRef> {
        values.iter().map(|v| v.slice(at, len)).collect()
    }

    /// Every path to the group's result, for a fresh accumulator from `new`; `args` are the
    /// aggregate's arguments and `groups` assigns each row its group.
    fn same_by_every_path<G: GroupsAccumulator>(
        new: impl Fn() -> G,
        args: &[ArrayRef],
        groups: &[usize],
        n_groups: usize,
    ) {
        let mut one = new();
        one.update_batch(args, groups, None, n_groups).unwrap();
        let want = one.evaluate(EmitTo::All).unwrap();

        // Two partial accumulators over two halves, merged.
        let half = groups.len() / 2;
        let mut merged = new();
        for (at, len) in [(0, half), (half, groups.len() - half)] {
            let mut part = new();
            part.update_batch(&rows(args, at, len), &groups[at..at + len], None, n_groups)
                .unwrap();
            let state = part.state(EmitTo::All).unwrap();
            let every: Vec<usize> = (0..n_groups).collect();
            merged.merge_batch(&state, &every, n_groups).unwrap();
        }
        assert_eq!(
            merged.evaluate(EmitTo::All).unwrap().as_ref(),
            want.as_ref()
        );

        // Each row its own partial state, merged into its group.
        let states = new().convert_to_state(args, None).unwrap();
        let mut from_rows = new();
        from_rows.merge_batch(&states, groups, n_groups).unwrap();
        assert_eq!(
            from_rows.evaluate(EmitTo::All).unwrap().as_ref(),
            want.as_ref()
        );

        // The first group emitted on its own, then the rest.
        let mut split = new();
        split.update_batch(args, groups, None, n_groups).unwrap();
        let first = split.evaluate(EmitTo::First(1)).unwrap();
        let rest = split.evaluate(EmitTo::All).unwrap();
        let both = datafusion::arrow::compute::concat(&[first.as_ref(), rest.as_ref()]).unwrap();
        assert_eq!(both.as_ref(), want.as_ref());
    }

    #[test]
    fn administration_partial_states_merge_to_the_same_result() {
        let args = requests();
        let n = args[0].len();
        // Single items to group 0 or 2 alternately, whole-test requests to group 1.
        let groups: Vec<usize> = (0..n)
            .map(|i| if i >= 18 { 1 } else { 2 * (i % 2) })
            .collect();
        same_by_every_path(administration, &args, &groups, 3);
    }

    #[test]
    fn administration_of_known_replies() {
        let args = requests();
        let mut a = administration();
        // Items 1..=3 (one of each dimension), as single items: replies "2", "3", "4" read
        // with reversed, human, reversed options.
        a.update_batch(&rows(&args, 0, 3), &[0, 0, 0], None, 1)
            .unwrap();
        let out = a.evaluate(EmitTo::All).unwrap();
        let s = out.as_struct();
        assert!(
            !s.column(0).as_boolean().value(0),
            "three different options"
        );
        let per_dim = s.column(1).as_list::<i32>().value(0);
        let per_dim = per_dim.as_struct();
        let n = per_dim.column(1).as_primitive::<Int64Type>();
        assert_eq!(n.values().iter().sum::<i64>(), 3);
        assert_eq!(
            n.values().iter().filter(|x| **x == 1).count(),
            3,
            "one item per dimension"
        );
    }

    #[test]
    fn request_counts_partial_states_merge_to_the_same_result() {
        let r = requests();
        let n = r[0].len();
        let rule: ArrayRef = Arc::new(StringArray::from(
            (0..n)
                .map(|i| if i % 3 == 0 { "lenient" } else { "strict" })
                .collect::<Vec<_>>(),
        ));
        let args = vec![rule, r[3].clone(), r[4].clone(), r[6].clone()];
        let groups: Vec<usize> = (0..n).map(|i| i % 4).collect();
        same_by_every_path(CountGroups::default, &args, &groups, 4);

        let mut all = CountGroups::default();
        all.update_batch(&args, &vec![0; n], None, 1).unwrap();
        let out = all.evaluate(EmitTo::All).unwrap();
        let counts: Vec<i64> = (0..COUNTS)
            .map(|c| {
                out.as_struct()
                    .column(c)
                    .as_primitive::<Int64Type>()
                    .value(0)
            })
            .collect();
        // 21 requests, one failed; 18 single items and 3 x 18 shown positions, one failed.
        assert_eq!(&counts[..2], &[21, 1]);
        assert_eq!(counts[3], 18 + 3 * 18);
        assert_eq!(counts[4], 1);
        // Readable replies and items as each request's rule reads it, one request at a time.
        let (mut replies, mut items) = (0, 0);
        let reply = r[3].as_string::<i32>();
        let item_order = r[6].as_string::<i32>();
        for i in (0..n).filter(|i| *i != 6) {
            let rule = if i % 3 == 0 {
                ReplyRule::Lenient
            } else {
                ReplyRule::Strict
            };
            let read = match item_order.is_null(i) {
                true => vec![rule.read_single(reply.value(i))],
                false => rule.read_whole(reply.value(i), 18),
            };
            let ok = read.iter().filter(|x| x.status == Status::Ok).count() as i64;
            items += ok;
            replies += i64::from(ok == read.len() as i64);
        }
        assert_eq!((counts[2], counts[5]), (replies, items));
        assert!(
            replies > 0 && replies < 20,
            "{replies}: some readable, some not"
        );
    }
}
