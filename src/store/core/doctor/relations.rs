//! Relations between what the files say: leases, where a todo's status puts it, dependencies,
//! gates' blocks, durations, and the quota's spends.

use std::collections::{HashMap, HashSet};

use super::{CLOCK_SKEW_MS, Doc, Finding, State, key_line};
use crate::kernel::{Dur, Todo, Ts};

/// Every relation check.
pub fn check(s: &State, now: Ts, out: &mut Vec<Finding>) {
    open_and_archived(s, out);
    statuses(s, out);
    references(s, out);
    cycles(&s.todos, out);
    for t in &s.todos {
        lease(t, now, out);
    }
    durations(s, out);
    spends(s, now, out);
    overdue(s, now, out);
    reservations(s, now, out);
}

/// Live leases of different agents whose reservations overlap (a warning: left by a hand edit
/// or a repaired file, which no claim would have allowed). Each pair once, on the later lease.
fn reservations(s: &State, now: Ts, out: &mut Vec<Finding>) {
    let mut live: Vec<(&Doc<Todo>, &crate::kernel::Lease)> = s
        .todos
        .iter()
        .filter_map(|t| Some((t, t.value.live_lease(now)?)))
        .filter(|(_, l)| !l.paths.is_empty())
        .collect();
    live.sort_by_key(|(t, l)| (l.acquired_at, t.value.id.clone()));
    let budget = crate::kernel::reserve::Budget::new();
    for (i, (t, l)) in live.iter().enumerate() {
        let clash = live[..i].iter().find_map(|(e, el)| {
            let o = crate::kernel::reserve::overlaps(&l.paths, &el.paths, &budget);
            (el.holder != l.holder && !o.is_empty()).then_some((e, el, o))
        });
        if let Some((e, el, o)) = clash {
            let esc = crate::text::escape;
            out.push(Finding::warning(
                t.file(),
                key_line(&t.path, Some(("[lease]", 0)), "paths"),
                format!(
                    "{}'s reservation ({}) overlaps {} of {}, held by {}: two agents may edit the same files; release one (`loopx todo release {}`)",
                    esc(&t.value.id),
                    esc(&o[0].0),
                    esc(&o[0].1),
                    esc(&e.value.id),
                    esc(&el.holder),
                    esc(&t.value.id)
                ),
            ));
        }
    }
}

/// Overdue monitors (a warning: the state is healthy, the work is late).
fn overdue(s: &State, now: Ts, out: &mut Vec<Finding>) {
    for t in &s.todos {
        let v = &t.value;
        if let (Some(late), Some(every)) = (crate::kernel::monitor::overdue(v, now), v.every) {
            out.push(Finding::warning(
                t.file(),
                key_line(&t.path, None, "next_due_at"),
                format!(
                    "monitor {} is overdue: due {} ago, every {every}; run it (or `loopx monitor poll` for a check)",
                    crate::text::escape(&v.id),
                    Dur(late.0 / 1000 * 1000)
                ),
            ));
        }
    }
}

/// A todo both in `todos/` and `archive/`: an interrupted archive.
fn open_and_archived(s: &State, out: &mut Vec<Finding>) {
    let open: HashSet<&str> = s.todos.iter().map(|t| t.value.id.as_str()).collect();
    for a in &s.archived {
        let id = &a.value.id;
        if open.contains(id.as_str()) {
            out.push(
                Finding::error(
                    format!(".loopx/todos/{id}.toml"),
                    None,
                    format!("{id} is both open and archived (an interrupted archive); the archived copy is kept"),
                )
                .fixable(),
            );
        }
    }
}

/// `done`/`cancelled` only in `archive/`; `open`/`blocked`/`deferred` only in `todos/`.
fn statuses(s: &State, out: &mut Vec<Finding>) {
    for t in s.todos.iter().filter(|t| t.value.status.is_final()) {
        out.push(Finding::error(
            t.file(),
            key_line(&t.path, None, "status"),
            format!(
                "status {} in todos/: a finished todo belongs in archive/; move the file there or set its status",
                t.value.status.as_str()
            ),
        ));
    }
    for t in s.archived.iter().filter(|t| !t.value.status.is_final()) {
        out.push(Finding::error(
            t.file(),
            key_line(&t.path, None, "status"),
            format!(
                "status {} in archive/: only done and cancelled todos are archived; move the file to todos/ or set its status",
                t.value.status.as_str()
            ),
        ));
    }
}

/// Dependencies and gate blocks must name todos that exist.
fn references(s: &State, out: &mut Vec<Finding>) {
    let known: HashSet<&str> = s
        .todos
        .iter()
        .chain(&s.archived)
        .map(|t| t.value.id.as_str())
        .collect();
    for t in &s.todos {
        for dep in t
            .value
            .depends_on
            .iter()
            .filter(|d| !known.contains(d.as_str()))
        {
            out.push(Finding::error(
                t.file(),
                key_line(&t.path, None, "depends_on"),
                format!("depends on {dep}, which does not exist; remove it from depends_on"),
            ));
        }
    }
    for g in &s.gates {
        for b in g
            .value
            .blocks
            .iter()
            .filter(|b| !known.contains(b.as_str()))
        {
            out.push(Finding::error(
                g.file(),
                key_line(&g.path, None, "blocks"),
                format!("blocks {b}, which does not exist; remove it from blocks"),
            ));
        }
    }
}

/// Dependency cycles among working todos: none of their todos can ever be ready.
fn cycles(todos: &[Doc<Todo>], out: &mut Vec<Finding>) {
    let by_id: HashMap<&str, &Doc<Todo>> = todos.iter().map(|t| (t.value.id.as_str(), t)).collect();
    // 0: not seen, 1: on the current path, 2: done.
    let mut color: HashMap<&str, u8> = by_id.keys().map(|k| (*k, 0)).collect();
    let mut ids: Vec<&str> = by_id.keys().copied().collect();
    ids.sort_unstable();
    for start in ids {
        if color[start] != 0 {
            continue;
        }
        color.insert(start, 1);
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        while let Some((node, i)) = stack.last_mut() {
            let deps = &by_id[*node].value.depends_on;
            let Some(next) = deps.get(*i).map(String::as_str) else {
                color.insert(node, 2);
                stack.pop();
                continue;
            };
            *i += 1;
            match color.get(next) {
                Some(0) => {
                    color.insert(next, 1);
                    stack.push((next, 0));
                }
                Some(1) => {
                    let from = stack.iter().position(|(n, _)| *n == next).unwrap_or(0);
                    let path: Vec<&str> = stack[from..].iter().map(|(n, _)| *n).collect();
                    out.push(cycle_finding(&path, &by_id));
                }
                _ => {}
            }
        }
    }
}

/// A finding naming the cycle, from its smallest id: `t-a -> t-b -> t-a`.
fn cycle_finding(path: &[&str], by_id: &HashMap<&str, &Doc<Todo>>) -> Finding {
    let first = (0..path.len()).min_by_key(|i| path[*i]).unwrap_or(0);
    let mut ring: Vec<&str> = path[first..]
        .iter()
        .chain(&path[..first])
        .copied()
        .collect();
    ring.push(ring[0]);
    let doc = by_id[ring[0]];
    Finding::error(
        doc.file(),
        key_line(&doc.path, None, "depends_on"),
        format!(
            "a dependency cycle: {}; none of these can ever be ready: remove one dependency",
            ring.join(" -> ")
        ),
    )
}

/// A lease: a holder, an order in time, the todo's fence; expired is a warning `--fix` clears.
fn lease(t: &Doc<Todo>, now: Ts, out: &mut Vec<Finding>) {
    let Some(l) = &t.value.lease else {
        return;
    };
    let line = |key: &str| key_line(&t.path, Some(("[lease]", 0)), key);
    if l.holder.trim().is_empty() {
        out.push(Finding::error(
            t.file(),
            line("holder"),
            "the lease has no holder; remove the [lease] table to free the todo",
        ));
    }
    if l.expires_at < l.acquired_at {
        out.push(Finding::error(
            t.file(),
            line("expires_at"),
            format!(
                "the lease expires at {}, before it was acquired at {}",
                l.expires_at, l.acquired_at
            ),
        ));
    } else if !l.is_live(now) {
        out.push(
            Finding::warning(
                t.file(),
                line("expires_at"),
                format!(
                    "the lease of {} (fence {}) expired at {}",
                    l.holder, l.fence, l.expires_at
                ),
            )
            .fixable(),
        );
    }
    if l.fence != t.value.fence {
        out.push(Finding::error(
            t.file(),
            line("fence"),
            format!(
                "the lease's fence {} differs from the todo's fence {}",
                l.fence, t.value.fence
            ),
        ));
    }
}

/// Windows, ttls and periods must be positive; the minimum interval must fit in the window.
fn durations(s: &State, out: &mut Vec<Finding>) {
    if let Some(c) = &s.config {
        let q = &c.value.quota;
        let at = |table: &str, key: &str| key_line(&c.path, Some((table, 0)), key);
        let mut positive = |d: Dur, table: &str, key: &str| {
            if d.0 <= 0 {
                out.push(Finding::error(
                    c.file(),
                    at(table, key),
                    format!("{table} {key} is {}; it must be longer than zero", sign(d)),
                ));
            }
        };
        positive(q.window, "[quota]", "window");
        positive(c.value.lease.ttl, "[lease]", "ttl");
        if q.min_interval.0 < 0 {
            out.push(Finding::error(
                c.file(),
                at("[quota]", "min_interval"),
                format!(
                    "[quota] min_interval is {}; it cannot be negative",
                    sign(q.min_interval)
                ),
            ));
        } else if q.window.0 > 0 && q.min_interval > q.window {
            out.push(Finding::error(
                c.file(),
                at("[quota]", "min_interval"),
                format!(
                    "[quota] min_interval {} is longer than the window {}: at most one turn per window",
                    q.min_interval, q.window
                ),
            ));
        }
    }
    for t in &s.todos {
        if let Some(e) = t.value.every.filter(|e| e.0 <= 0) {
            out.push(Finding::error(
                t.file(),
                key_line(&t.path, None, "every"),
                format!(
                    "every is {}; a recurring todo's period must be longer than zero",
                    sign(e)
                ),
            ));
        }
    }
}

/// A zero or negative duration in words (a negative one is never formatted: it may be huge).
fn sign(d: Dur) -> &'static str {
    if d.0 == 0 { "0s" } else { "negative" }
}

/// Each spend's cost is a finite, non-negative number, and it is not dated in the future.
fn spends(s: &State, now: Ts, out: &mut Vec<Finding>) {
    let Some(q) = &s.quota else {
        return;
    };
    let ahead = Ts(now.0.saturating_add(CLOCK_SKEW_MS));
    for (i, sp) in q.value.spends.iter().enumerate() {
        let line = |key: &str| key_line(&q.path, Some(("[[spend]]", i)), key);
        if let Some(c) = sp.cost_usd.filter(|c| !c.is_finite() || *c < 0.0) {
            out.push(Finding::error(
                q.file(),
                line("cost_usd"),
                format!(
                    "spend {} has cost_usd {c}; a cost is a finite number, zero or more",
                    i + 1
                ),
            ));
        }
        if sp.at > ahead {
            out.push(Finding::error(
                q.file(),
                line("at"),
                format!(
                    "spend {} is dated {}, in the future (this machine's clock says {now})",
                    i + 1,
                    sp.at
                ),
            ));
        }
    }
}
