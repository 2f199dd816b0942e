//! The working set's todos by id: one vector kept in id order, which a load fills whole.

use crate::kernel::model::Todo;

/// Todos by id, in id order. A load gives them sorted, so building one moves each todo once
/// and allocates nothing per todo (a tree map moved each again into its nodes).
#[derive(Clone, Default, PartialEq)]
pub struct TodoMap(Vec<(String, Todo)>);

impl std::fmt::Debug for TodoMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// One entry as a pair of references.
type Pair<'a> = (&'a String, &'a Todo);
/// The entries as pairs of references, in id order.
pub type Iter<'a> =
    std::iter::Map<std::slice::Iter<'a, (String, Todo)>, fn(&(String, Todo)) -> Pair<'_>>;

fn pair(e: &(String, Todo)) -> Pair<'_> {
    (&e.0, &e.1)
}

impl TodoMap {
    /// No todos.
    pub fn new() -> TodoMap {
        TodoMap(Vec::new())
    }

    fn find(&self, id: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(id))
    }

    /// The todo with this id.
    pub fn get(&self, id: &str) -> Option<&Todo> {
        self.find(id).ok().map(|i| &self.0[i].1)
    }

    /// The todo with this id, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Todo> {
        self.find(id).ok().map(|i| &mut self.0[i].1)
    }

    /// True when a todo has this id.
    pub fn contains_key(&self, id: &str) -> bool {
        self.find(id).is_ok()
    }

    /// Puts a todo under `id`, giving back the one it replaces.
    pub fn insert(&mut self, id: String, t: Todo) -> Option<Todo> {
        if self.0.last().is_none_or(|(k, _)| *k < id) {
            self.0.push((id, t));
            return None;
        }
        match self.find(&id) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, t)),
            Err(i) => {
                self.0.insert(i, (id, t));
                None
            }
        }
    }

    /// Takes out the todo with this id.
    pub fn remove(&mut self, id: &str) -> Option<Todo> {
        self.find(id).ok().map(|i| self.0.remove(i).1)
    }

    /// How many todos.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes every todo.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The ids, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|e| &e.0)
    }

    /// The todos, in id order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Todo> + ExactSizeIterator {
        self.0.iter().map(|e| &e.1)
    }

    /// The todos, in id order, to change (their ids stay).
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Todo> + ExactSizeIterator {
        self.0.iter_mut().map(|e| &mut e.1)
    }

    /// Each id with its todo, in order.
    pub fn iter(&self) -> Iter<'_> {
        self.0.iter().map(pair)
    }
}

impl FromIterator<(String, Todo)> for TodoMap {
    /// Sorted by id where they are not already; of two with one id the later stays, as in a map.
    fn from_iter<I: IntoIterator<Item = (String, Todo)>>(iter: I) -> TodoMap {
        let mut v: Vec<(String, Todo)> = iter.into_iter().collect();
        if v.windows(2).all(|w| w[0].0 < w[1].0) {
            return TodoMap(v);
        }
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, Todo)> = Vec::with_capacity(v.len());
        for e in v {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        TodoMap(out)
    }
}

impl<'a> IntoIterator for &'a TodoMap {
    type Item = Pair<'a>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl IntoIterator for TodoMap {
    type Item = (String, Todo);
    type IntoIter = std::vec::IntoIter<(String, Todo)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl std::ops::Index<&str> for TodoMap {
    type Output = Todo;

    /// The todo with this id; panics when there is none, as a map does.
    fn index(&self, id: &str) -> &Todo {
        self.get(id).expect("no todo with this id")
    }
}

impl Extend<(String, Todo)> for TodoMap {
    fn extend<I: IntoIterator<Item = (String, Todo)>>(&mut self, iter: I) {
        for (id, t) in iter {
            self.insert(id, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(id: &str, title: &str) -> (String, Todo) {
        let snap = crate::kernel::Snapshot::new(crate::kernel::Config::new(
            "g",
            "o",
            crate::kernel::Ts(0),
        ));
        let new = crate::kernel::ops::NewTodo::new(id, title);
        let (_, t) =
            crate::kernel::ops::add_todo(&snap, "a", crate::kernel::Ts(0), new).expect("add");
        (id.into(), t)
    }

    #[test]
    fn it_keeps_id_order_and_the_last_of_one_id_like_a_map() {
        let m: TodoMap = [todo("b", "1"), todo("a", "2"), todo("b", "3")]
            .into_iter()
            .collect();
        let got: Vec<_> = m
            .iter()
            .map(|(k, t)| (k.as_str(), t.title.as_str()))
            .collect();
        assert_eq!(got, [("a", "2"), ("b", "3")]);
        let mut m = m;
        assert_eq!(m.insert("c".into(), todo("c", "4").1), None);
        assert_eq!(m.insert("0".into(), todo("0", "5").1), None);
        assert_eq!(
            m.insert("a".into(), todo("a", "6").1).map(|t| t.title),
            Some("2".into())
        );
        assert_eq!(
            m.keys().map(String::as_str).collect::<Vec<_>>(),
            ["0", "a", "b", "c"]
        );
        assert_eq!(m.remove("b").map(|t| t.title), Some("3".into()));
        assert_eq!(m.remove("b"), None);
        assert_eq!(m.get("a").map(|t| t.title.as_str()), Some("6"));
        assert!(m.contains_key("0") && !m.contains_key("b"));
        assert_eq!(m.len(), 3);
    }
}
