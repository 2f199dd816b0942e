//! The todo columns' sort orders, toggled on a key: pick order, priority, age, holder.

use crate::board::derive::{Card, Column, Columns, Why};

/// How the working columns (Ready to Blocked) are sorted; Done stays newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Each column's own order: Ready in pick order, Claimed soonest expiry first, others by
    /// priority.
    #[default]
    Pick,
    /// Priority, then oldest.
    Priority,
    /// Oldest first.
    Age,
    /// Lease holder (claimed cards), then the column's own order.
    Holder,
}

impl SortBy {
    /// The next order on the key.
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Pick => SortBy::Priority,
            SortBy::Priority => SortBy::Age,
            SortBy::Age => SortBy::Holder,
            SortBy::Holder => SortBy::Pick,
        }
    }

    /// Its name for people.
    pub fn name(self) -> &'static str {
        match self {
            SortBy::Pick => "pick order",
            SortBy::Priority => "priority",
            SortBy::Age => "age",
            SortBy::Holder => "holder",
        }
    }
}

fn holder(c: &Card) -> Option<&str> {
    match &c.why {
        Why::Lease { holder, .. } => Some(holder),
        _ => None,
    }
}

/// Sorts the working columns in place (stable: ties keep the column's own order).
pub fn sort_columns(cols: &mut Columns, by: SortBy) {
    for col in [
        Column::Ready,
        Column::Claimed,
        Column::Waiting,
        Column::Blocked,
    ] {
        let cards = &mut cols.cols[col.index()];
        match by {
            SortBy::Pick => {}
            SortBy::Priority => cards.sort_by(|a, b| {
                (a.priority, a.created_at, &a.id).cmp(&(b.priority, b.created_at, &b.id))
            }),
            SortBy::Age => cards.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id))),
            // Cards without a holder keep their order after those with one.
            SortBy::Holder => cards.sort_by(|a, b| match (holder(a), holder(b)) {
                (Some(x), Some(y)) => x.cmp(y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            }),
        }
    }
}
