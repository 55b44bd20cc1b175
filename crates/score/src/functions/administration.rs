//! `strict_administration(test, mode, item, reply, failed, option_order, item_order)` and
//! `lenient_administration` (same arguments): an administration's scored readings, struct
//! `{constant_answers, per_dim}`: whether at least two items were read `ok` and all with one
//! option; per dimension slot (the `ix` of the key tables, in slot order) the items read `ok`
//! that the key scores and their points, as a list of struct `{ix, n, p}`.
//!
//! Only readings `ok` of items the key scores count, and only their options enter the
//! constant-answer flag. Points are integer-valued, so their sums are exact in any order. Every
//! group's state is kept in flat vectors, and the partial states (for a plan that aggregates in
//! two phases) are the same sums.

use crate::kernels::{
    cast_args, reply_arg_types, request_readings, slot_fields, value, ItemPoints, KeyPoints,
    ReplyArgs, Texts,
};
use crate::rules::{Reading, ReplyRule};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, ListArray,
    StructArray,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Float64Type, Int32Type, Int64Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{AggregateUDF, EmitTo, Signature, Volatility};
use protospread_engine::{groups_udaf, ByAddress, Groups, GroupsFunction, Rows};
use std::sync::Arc;

/// The function of `rule`, reading `key`, ready to register.
pub(super) fn udaf(rule: ReplyRule, key: Arc<KeyPoints>) -> AggregateUDF {
    let signature = Signature::any(7, Volatility::Immutable);
    groups_udaf(name(rule), signature, Administration::new(rule, key))
}

/// The function's name under `rule`.
fn name(rule: ReplyRule) -> &'static str {
    match rule {
        ReplyRule::Strict => "strict_administration",
        ReplyRule::Lenient => "lenient_administration",
    }
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

/// `strict_administration(...)` and `lenient_administration(...)`: see the module doc.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Administration {
    rule: ReplyRule,
    key: ByAddress<KeyPoints>,
}

impl Administration {
    fn new(rule: ReplyRule, key: Arc<KeyPoints>) -> Self {
        Administration {
            rule,
            key: ByAddress(key),
        }
    }
}

impl GroupsFunction for Administration {
    type Groups = AdministrationGroups;
    fn return_type(&self) -> DataType {
        DataType::Struct(administration_fields())
    }
    fn state_fields(&self) -> Vec<Field> {
        let mut f = vec![
            Field::new("opt_n", DataType::Int64, false),
            Field::new("opt_min", DataType::Int32, true),
            Field::new("opt_max", DataType::Int32, true),
        ];
        for i in 0..self.key.slots() {
            f.push(Field::new(format!("n_{i}"), DataType::Int64, false));
            f.push(Field::new(format!("p_{i}"), DataType::Float64, false));
        }
        f
    }
    fn groups(&self) -> AdministrationGroups {
        AdministrationGroups::new(self.rule, name(self.rule), self.key.0.clone())
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

impl Groups for AdministrationGroups {
    fn empty(&self) -> Self {
        AdministrationGroups::new(self.rule, &self.name, self.key.clone())
    }

    fn grow(&mut self, groups: usize) {
        self.resize(groups);
    }

    fn update(&mut self, rows: Rows<'_>) -> Result<()> {
        let mut types = vec![DataType::Utf8];
        types.extend(reply_arg_types());
        let a = cast_args(rows.values, &types, &self.name)?;
        let (test, request) = (Texts::new(&a[0]), ReplyArgs::of(&a[1..]));
        let key = self.key.clone();
        let mut shown: Vec<(i32, Option<i32>, Reading)> = Vec::new();
        let mut keyed: Option<(&str, &ItemPoints)> = None;
        for (i, &g) in rows.groups.iter().enumerate() {
            if !rows.counted(i) {
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

    fn merge(&mut self, rows: Rows<'_>) -> Result<()> {
        let values = rows.values;
        if values.len() != 3 + 2 * self.slots {
            return exec_err!("{}: a partial state of {} columns", self.name, values.len());
        }
        let on = values[0].as_primitive::<Int64Type>();
        let (omin, omax) = (
            values[1].as_primitive::<Int32Type>(),
            values[2].as_primitive::<Int32Type>(),
        );
        for (i, &g) in rows.groups.iter().enumerate() {
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

    fn size(&self) -> usize {
        self.opt_n.capacity() * 8
            + self.opt_min.capacity() * 8
            + self.opt_max.capacity() * 8
            + self.n.capacity() * 8
            + self.p.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{key, requests, rows, same_by_every_path};
    use super::*;
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::logical_expr::GroupsAccumulator;
    use protospread_engine::Accumulate;

    fn administration() -> Accumulate<AdministrationGroups> {
        Accumulate(Administration::new(ReplyRule::Strict, key()).groups())
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
}
