//! The values a construction has built, each at the first index not taken
//! from the one it asks for, as Handle.Net's `TemplateBuilder` places them.
//! The original sorts every value built so far before adding each new one;
//! here the taken indexes are a set and the order is made once at the end.

use handled_proto::value::HandleValue;
use std::collections::HashSet;

#[derive(Default)]
pub struct Built {
    values: Vec<HandleValue>,
    taken: HashSet<i32>,
}

impl Built {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Add `value` at the first free index from `from`; the indexes tried
    /// (the work it took).
    pub fn push(&mut self, mut value: HandleValue, from: i32) -> usize {
        let (mut index, mut tried) = (from, 1);
        while self.taken.contains(&index) {
            // Java's int arithmetic, which wraps.
            index = index.wrapping_add(1);
            tried += 1;
        }
        value.index = index;
        self.taken.insert(index);
        self.values.push(value);
        tried
    }

    /// The first value in the original's order ([`Built::into_values`]).
    pub fn first(&self) -> Option<&HandleValue> {
        match self.values.split_last() {
            Some((last, [])) => Some(last),
            Some((_, sorted)) => sorted.iter().min_by_key(|v| v.index),
            None => None,
        }
    }

    /// The values in the original's order: those built before the last in
    /// index order (it sorted them before adding the last), then the last.
    pub fn into_values(mut self) -> Vec<HandleValue> {
        let last = self.values.pop();
        self.values.sort_by_key(|v| v.index);
        self.values.extend(last);
        self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexes(values: &[HandleValue]) -> Vec<i32> {
        values.iter().map(|v| v.index).collect()
    }

    #[test]
    fn each_value_takes_the_first_free_index_and_the_order_is_the_originals() {
        let mut built = Built::default();
        for from in [5, 1, 5, 2, 1] {
            built.push(HandleValue::new(0, "T", "d"), from);
        }
        // 5, 1, 6 (5 taken), 2, 3 (1 and 2 taken); all but the last sorted.
        assert_eq!(built.first().map(|v| v.index), Some(1));
        assert_eq!(indexes(&built.into_values()), [1, 2, 5, 6, 3]);
        let mut edge = Built::default();
        edge.push(HandleValue::new(0, "T", "d"), i32::MAX);
        edge.push(HandleValue::new(0, "T", "d"), i32::MAX);
        assert_eq!(indexes(&edge.into_values()), [i32::MAX, i32::MIN]);
    }
}
