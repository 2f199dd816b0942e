//! The cache's binary rows: a todo's fields in a fixed order, little-endian, strings as a
//! length and UTF-8 bytes, so reading one parses no names, no dates and no quoting.

use crate::kernel::{Check, Dur, Extra, Lease, Priority, Role, Status, Todo, Ts};

const ROLES: [Role; 2] = [Role::Agent, Role::User];
const PRIORITIES: [Priority; 5] = [
    Priority::P0,
    Priority::P1,
    Priority::P2,
    Priority::P3,
    Priority::P4,
];
const STATUSES: [Status; 5] = [
    Status::Open,
    Status::Blocked,
    Status::Deferred,
    Status::Done,
    Status::Cancelled,
];

/// True when every field of the todo fits a row (no unknown keys, no stall, no lease base).
pub(super) fn cacheable(t: &Todo) -> bool {
    t.extra.is_empty()
        && t.schema_version == crate::kernel::SCHEMA_VERSION
        && t.stall.is_none()
        && t.lease
            .as_ref()
            .is_none_or(|l| l.extra.is_empty() && l.base.is_none())
        && t.check.as_ref().is_none_or(|c| c.extra.is_empty())
}

/// Appends values to a row buffer.
pub(super) struct W(pub(super) Vec<u8>);

impl W {
    pub(super) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(super) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn str(&mut self, s: &str) {
        // Every string a todo holds is bounded far below 4 GiB (kernel::limits).
        self.u32(u32::try_from(s.len()).unwrap_or(u32::MAX));
        self.0.extend_from_slice(s.as_bytes());
    }
    fn opt_str(&mut self, s: Option<&str>) {
        self.u8(u8::from(s.is_some()));
        if let Some(s) = s {
            self.str(s);
        }
    }
    fn opt_i64(&mut self, v: Option<i64>) {
        self.u8(u8::from(v.is_some()));
        if let Some(v) = v {
            self.i64(v);
        }
    }
    fn list(&mut self, v: &[String]) {
        self.u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        for s in v {
            self.str(s);
        }
    }
}

/// The most strings a todo's list may hold: its longest limit (`depends_on`, `exclude_agents`).
pub(super) const LIST_MAX: usize = 100;

/// Reads values off a row buffer; every read is checked, `None` at the first bad byte.
pub(super) struct R<'a>(pub(super) &'a [u8]);

impl R<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    pub(super) fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }
    pub(super) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub(super) fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }
    pub(super) fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }
    pub(super) fn i64(&mut self) -> Option<i64> {
        self.take(8)?.try_into().ok().map(i64::from_le_bytes)
    }
    pub(super) fn str(&mut self) -> Option<String> {
        let n = usize::try_from(self.u32()?).ok()?;
        let b = self.take(n)?;
        std::str::from_utf8(b).ok().map(str::to_string)
    }
    fn flag(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn opt_str(&mut self) -> Option<Option<String>> {
        Some(if self.flag()? {
            Some(self.str()?)
        } else {
            None
        })
    }
    fn opt_i64(&mut self) -> Option<Option<i64>> {
        Some(if self.flag()? {
            Some(self.i64()?)
        } else {
            None
        })
    }
    pub(super) fn list(&mut self) -> Option<Vec<String>> {
        let n = usize::try_from(self.u32()?).ok()?;
        // Each string takes at least its 4-byte length, and no list of a todo holds more than
        // LIST_MAX: a count beyond either is forged (and would cost six times its bytes).
        if n > self.0.len() / 4 || n > LIST_MAX {
            return None;
        }
        (0..n).map(|_| self.str()).collect()
    }
    fn pick<T: Copy>(&mut self, of: &[T]) -> Option<T> {
        of.get(usize::from(self.u8()?)).copied()
    }
}

fn index<T: PartialEq>(of: &[T], v: &T) -> u8 {
    of.iter()
        .position(|x| x == v)
        .and_then(|i| u8::try_from(i).ok())
        .unwrap_or(u8::MAX)
}

/// Writes a cacheable todo's fields.
pub(super) fn put_todo(w: &mut W, t: &Todo) {
    w.str(&t.id);
    w.str(&t.title);
    w.u8(index(&ROLES, &t.role));
    w.u8(index(&PRIORITIES, &t.priority));
    w.u8(index(&STATUSES, &t.status));
    w.list(&t.depends_on);
    w.opt_i64(t.every.map(|d| d.0));
    w.opt_i64(t.next_due_at.map(|x| x.0));
    w.str(&t.created_by);
    w.i64(t.created_at.0);
    w.i64(t.updated_at.0);
    w.opt_str(t.reason.as_deref());
    w.opt_str(t.status_by.as_deref());
    w.u64(t.fence);
    w.opt_i64(t.overdue_noted.map(|x| x.0));
    w.list(&t.requires);
    w.opt_str(t.reviews.as_deref());
    w.list(&t.exclude_agents);
    w.opt_str(t.body.as_deref());
    w.list(&t.links);
    w.list(&t.paths);
    put_check(w, t.check.as_deref());
    put_lease(w, t.lease.as_deref());
}

fn put_check(w: &mut W, c: Option<&Check>) {
    w.u8(u8::from(c.is_some()));
    if let Some(c) = c {
        w.str(&c.command);
        w.str(&c.proposed_by);
        w.i64(c.proposed_at.0);
        w.opt_str(c.last_hash.as_deref());
        w.opt_i64(c.last_run_at.map(|x| x.0));
        w.opt_i64(c.last_exit.map(i64::from));
    }
}

fn put_lease(w: &mut W, l: Option<&Lease>) {
    w.u8(u8::from(l.is_some()));
    if let Some(l) = l {
        w.str(&l.holder);
        w.u64(l.fence);
        w.i64(l.acquired_at.0);
        w.i64(l.expires_at.0);
        w.opt_str(l.turn.as_deref());
        w.opt_str(l.handoff_from.as_deref());
        w.list(&l.paths);
        w.opt_str(l.worktree.as_deref());
    }
}

/// Reads a todo written by `put_todo`.
pub(super) fn get_todo(r: &mut R<'_>) -> Option<Todo> {
    Some(Todo {
        schema_version: crate::kernel::SCHEMA_VERSION,
        id: r.str()?,
        title: r.str()?,
        role: r.pick(&ROLES)?,
        priority: r.pick(&PRIORITIES)?,
        status: r.pick(&STATUSES)?,
        depends_on: r.list()?,
        every: r.opt_i64()?.map(Dur),
        next_due_at: r.opt_i64()?.map(Ts),
        created_by: r.str()?,
        created_at: Ts(r.i64()?),
        updated_at: Ts(r.i64()?),
        reason: r.opt_str()?,
        status_by: r.opt_str()?,
        fence: r.u64()?,
        overdue_noted: r.opt_i64()?.map(Ts),
        requires: r.list()?,
        reviews: r.opt_str()?,
        exclude_agents: r.list()?,
        body: r.opt_str()?,
        links: r.list()?,
        paths: r.list()?,
        stall: None,
        check: get_check(r)?.map(Box::new),
        lease: get_lease(r)?.map(Box::new),
        extra: Extra::new(),
    })
}

fn get_check(r: &mut R<'_>) -> Option<Option<Check>> {
    if !r.flag()? {
        return Some(None);
    }
    Some(Some(Check {
        command: r.str()?,
        proposed_by: r.str()?,
        proposed_at: Ts(r.i64()?),
        last_hash: r.opt_str()?,
        last_run_at: r.opt_i64()?.map(Ts),
        last_exit: match r.opt_i64()? {
            Some(x) => Some(i32::try_from(x).ok()?),
            None => None,
        },
        extra: Extra::new(),
    }))
}

fn get_lease(r: &mut R<'_>) -> Option<Option<Lease>> {
    if !r.flag()? {
        return Some(None);
    }
    Some(Some(Lease {
        holder: r.str()?,
        fence: r.u64()?,
        acquired_at: Ts(r.i64()?),
        expires_at: Ts(r.i64()?),
        turn: r.opt_str()?,
        handoff_from: r.opt_str()?,
        base: None,
        paths: r.list()?,
        worktree: r.opt_str()?,
        extra: Extra::new(),
    }))
}
