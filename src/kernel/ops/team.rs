//! Team mutations: a holder's directed hand-off of its lease, and a todo's edit (title, priority,
//! body, links, dependencies) by its creator or the owner.

use serde_json::json;

use super::{Change, OWNER, Write, check_lease, check_ttl, grant, todo};
use crate::kernel::action::Action;
use crate::kernel::error::{Error, Result};
use crate::kernel::id;
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::time::{Dur, Ts};

/// A todo handed to `agent` that it has not taken up yet (its live lease names who handed it).
pub fn handed_to<'a>(snap: &'a Snapshot, agent: &str, now: Ts) -> Option<&'a Todo> {
    snap.todos
        .values()
        .filter(|t| {
            t.live_lease(now)
                .is_some_and(|l| l.holder == agent && l.handoff_from.is_some())
        })
        .min_by(|a, b| {
            crate::kernel::readiness::pick_key(a, now)
                .cmp(&crate::kernel::readiness::pick_key(b, now))
        })
}

/// What `todo handoff` asks for.
#[derive(Debug, Clone)]
pub struct Handoff {
    /// The todo's id.
    pub id: String,
    /// The agent that receives the lease.
    pub to: String,
    /// The fence the holder believes it holds.
    pub fence: Option<u64>,
    /// The receiver's lease length.
    pub ttl: Dur,
    /// A note for the receiver, kept as evidence.
    pub note: Option<String>,
}

/// The holder passes its live lease to `h.to` with a new fence; the note becomes evidence
/// written under the old fence, in the same change.
pub fn handoff(snap: &Snapshot, agent: &str, now: Ts, h: Handoff) -> Result<(Change, Todo)> {
    let ttl = check_ttl(h.ttl)?;
    id::check_agent(&h.to)?;
    let mut t = todo(snap, &h.id)?.clone();
    // Whose lease it is comes first: a caller that holds nothing is told who does.
    check_lease(&t, agent, now, h.fence)?;
    if h.to == agent {
        return Err(
            Error::usage(format!("you already hold {}", h.id)).hint("name another agent with --to")
        );
    }
    // The receiver takes the todo on: the rules a claim applies to it, by the same function.
    let b = crate::kernel::readiness::may_take(snap, &t, &h.to, now);
    if !b.is_empty() {
        return Err(refused(&t.id, &h.to, &b));
    }
    // The reservation goes with the lease; the receiver's other leases do not clash with it.
    let paths = t
        .lease
        .as_ref()
        .map(|l| l.paths.clone())
        .unwrap_or_default();
    if let Some(b) = crate::kernel::reserve::conflict(snap, &t.id, &h.to, &paths, now) {
        return Err(clash(&t.id, &h.to, &b));
    }
    let old = t.fence;
    let mut c = Change::default();
    if let Some(n) = h.note.as_deref().filter(|n| !n.trim().is_empty()) {
        let e = Evidence::new(
            now,
            agent,
            Some(old),
            EvidenceKind::Note,
            format!("hand-off to {}: {}", h.to, n.trim()),
        );
        limits::usage(limits::check_evidence(&e))?;
        c.writes.push(Write::Evidence(t.id.clone(), e));
    }
    grant(&mut t, &h.to, now, ttl)?;
    if let Some(l) = t.lease.as_mut() {
        l.handoff_from = Some(agent.to_string());
        l.paths = paths;
    }
    c.event(
        now,
        agent,
        Action::TodoHandoff,
        &t.id,
        json!({"from": agent, "to": h.to, "fence": t.fence, "from_fence": old,
               "expires_at": t.lease.as_ref().map(|l| l.expires_at),
               "note": h.note.is_some()}),
    );
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}

/// A lease whose reservation would overlap a live one of another agent once `to` holds it:
/// exit 4, `lease_conflict`, as a claim of it would be.
pub(super) fn clash(id: &str, to: &str, b: &crate::kernel::readiness::Blocker) -> Error {
    let (holder, other) = match b {
        crate::kernel::readiness::Blocker::Reserved { holder, todo, .. } => {
            (holder.as_str(), todo.as_str())
        }
        _ => ("its holder", "its todo"),
    };
    Error::new(
        crate::kernel::error::Code::LeaseConflict,
        format!("{id} cannot go to {to}: {}", b.describe()),
    )
    .hint(format!(
        "wait for {holder} to finish {other}, or narrow that reservation"
    ))
    .details(json!({ "reasons": [b] }))
}

/// A hand-off the receiver may not take (exit 3, as its own claim would be), naming each rule.
fn refused(id: &str, to: &str, b: &[crate::kernel::readiness::Blocker]) -> Error {
    let reasons: Vec<String> = b.iter().map(|x| x.describe_for(to)).collect();
    Error::new(
        crate::kernel::error::Code::NotReady,
        format!("{id} cannot be handed to {to}: {}", reasons.join("; ")),
    )
    .hint(format!(
        "hand it to an agent that may claim it; the owner may override: `loopx todo reassign {id} --to {to}`"
    ))
    .details(json!({ "reasons": b }))
}

/// What `todo edit` changes; `None` (or false) leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    /// A new title.
    pub title: Option<String>,
    /// A new priority.
    pub priority: Option<Priority>,
    /// A new body (an empty text removes it).
    pub body: Option<String>,
    /// Drop every link first.
    pub clear_links: bool,
    /// Links to add (one already there is kept once).
    pub links: Vec<String>,
    /// New dependencies, replacing the old (resolved ids; empty with `set_depends`: none).
    pub depends_on: Option<Vec<String>>,
}

/// Edits an open, blocked or deferred todo: its creator's change, or else the owner's (the store
/// signs it or refuses it).
pub fn edit(snap: &Snapshot, agent: &str, now: Ts, id: &str, e: Edit) -> Result<(Change, Todo)> {
    let mut t = todo(snap, id)?.clone();
    let owner = t.created_by != agent || id::is_reserved_actor(agent);
    let actor = if owner { OWNER } else { agent };
    let changed = apply_edit(snap, &mut t, e)?;
    if changed.is_empty() {
        return Err(Error::usage(format!("nothing to change on {id}"))
            .hint("give --title, --priority, --body, --body-file, --link, --clear-links or --depends-on with a new value"));
    }
    limits::usage(limits::check_todo(&t))?;
    t.updated_at = now;
    let mut c = Change {
        owner,
        ..Change::default()
    };
    c.event(
        now,
        actor,
        Action::TodoEdit,
        id,
        json!({"changed": changed, "title": t.title, "priority": t.priority,
               "links": t.links, "depends_on": t.depends_on, "body": t.body.is_some()}),
    );
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}

/// Applies `e` to `t`: the names of the fields whose value changed.
fn apply_edit(snap: &Snapshot, t: &mut Todo, e: Edit) -> Result<Vec<&'static str>> {
    let mut changed = Vec::new();
    if let Some(title) = e.title {
        let title = title.trim().to_string();
        if title.is_empty() {
            return Err(Error::usage("a todo needs a title"));
        }
        if title != t.title {
            t.title = title;
            changed.push("title");
        }
    }
    if let Some(p) = e.priority.filter(|p| *p != t.priority) {
        t.priority = p;
        changed.push("priority");
    }
    if let Some(b) = e.body {
        let b = Some(b).filter(|b| !b.trim().is_empty());
        if b != t.body {
            t.body = b;
            changed.push("body");
        }
    }
    let before = t.links.clone();
    if e.clear_links {
        t.links.clear();
    }
    for l in e.links {
        if !t.links.contains(&l) {
            t.links.push(l);
        }
    }
    if t.links != before {
        changed.push("links");
    }
    if let Some(deps) = e.depends_on {
        check_no_cycle(snap, &t.id, &deps)?;
        if deps != t.depends_on {
            t.depends_on = deps;
            changed.push("depends_on");
        }
    }
    Ok(changed)
}

/// Refuses dependencies that would make `id` depend on itself, directly or through open todos.
fn check_no_cycle(snap: &Snapshot, id: &str, deps: &[String]) -> Result<()> {
    let mut stack: Vec<&str> = deps.iter().map(String::as_str).collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(d) = stack.pop() {
        if d == id {
            return Err(Error::usage(format!(
                "{id} cannot depend on itself (through {})",
                deps.join(", ")
            ))
            .hint("drop the dependency that leads back to it"));
        }
        if seen.insert(d)
            && let Some(t) = snap.todos.get(d)
        {
            stack.extend(t.depends_on.iter().map(String::as_str));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_link_has_a_scheme_and_no_space_or_control(s in "\\PC{0,40}", c in any::<char>()) {
            let url = format!("https://example.com/{s}{c}");
            let ok = limits::link("links", &url).is_ok();
            let clean = !url.chars().any(|ch| ch.is_whitespace() || crate::text::is_unsafe(ch));
            prop_assert_eq!(ok, clean);
            let bare = format!("example.com/{s}");
            prop_assert!(limits::link("links", &bare).is_err());
        }
    }
    use crate::kernel::error::Code;
    use crate::kernel::ops::{NewTodo, add_todo, claim};

    fn snap_with(ids: &[&str]) -> Snapshot {
        let mut s = Snapshot::new(Config::new("g-aaaaaa", "goal", Ts(1_700_000_000_000)));
        for id in ids {
            let (_, t) = add_todo(
                &s,
                "alice",
                Ts(1_700_000_000_000),
                NewTodo::new(id.to_string(), format!("do {id}")),
            )
            .unwrap();
            s.todos.insert(t.id.clone(), t);
        }
        s
    }

    const NOW: Ts = Ts(1_700_000_100_000);

    fn hand(id: &str, to: &str) -> Handoff {
        Handoff {
            id: id.into(),
            to: to.into(),
            fence: None,
            ttl: Dur::from_mins(10),
            note: Some("over to you".into()),
        }
    }

    #[test]
    fn a_handoff_moves_the_lease_with_a_new_fence_and_the_note() {
        let mut s = snap_with(&["t-aaaaaa"]);
        let (_, t) = claim(&s, "alice", NOW, Dur::from_mins(5), Some("t-aaaaaa")).unwrap();
        s.todos.insert(t.id.clone(), t);
        let (c, t) = handoff(&s, "alice", NOW, hand("t-aaaaaa", "bob")).unwrap();
        let l = t.lease.as_ref().unwrap();
        assert_eq!((l.holder.as_str(), l.fence), ("bob", 2));
        assert_eq!(l.handoff_from.as_deref(), Some("alice"));
        assert!(matches!(&c.writes[0], Write::Evidence(_, e) if e.fence == Some(1)));
        assert_eq!(c.events[0].action, Action::TodoHandoff);
        assert!(!c.owner);
        s.todos.insert(t.id.clone(), t);
        assert_eq!(
            handed_to(&s, "bob", NOW).map(|t| t.id.as_str()),
            Some("t-aaaaaa")
        );
        // The old holder is now a stranger to the lease.
        let err = handoff(&s, "alice", NOW, hand("t-aaaaaa", "carol")).unwrap_err();
        assert_eq!(err.code, Code::LeaseConflict);
    }

    #[test]
    fn a_handoff_needs_a_live_lease_a_current_fence_and_a_real_agent() {
        let mut s = snap_with(&["t-aaaaaa"]);
        assert_eq!(
            handoff(&s, "alice", NOW, hand("t-aaaaaa", "bob"))
                .unwrap_err()
                .code,
            Code::LeaseConflict
        );
        let (_, t) = claim(&s, "alice", NOW, Dur::from_mins(5), Some("t-aaaaaa")).unwrap();
        s.todos.insert(t.id.clone(), t);
        let mut h = hand("t-aaaaaa", "bob");
        h.fence = Some(7);
        assert_eq!(
            handoff(&s, "alice", NOW, h).unwrap_err().code,
            Code::StaleFence
        );
        assert_eq!(
            handoff(&s, "alice", NOW, hand("t-aaaaaa", "owner"))
                .unwrap_err()
                .code,
            Code::Usage
        );
        assert_eq!(
            handoff(&s, "alice", NOW, hand("t-aaaaaa", "alice"))
                .unwrap_err()
                .code,
            Code::Usage
        );
        let later = NOW.add(Dur::from_mins(6));
        assert_eq!(
            handoff(&s, "alice", later, hand("t-aaaaaa", "bob"))
                .unwrap_err()
                .code,
            Code::LeaseConflict
        );
    }

    #[test]
    fn an_edit_is_the_creators_or_the_owners() {
        let s = snap_with(&["t-aaaaaa", "t-bbbbbb"]);
        let e = Edit {
            body: Some("why and how".into()),
            links: vec!["https://example.com/issues/9".into()],
            ..Edit::default()
        };
        let (c, t) = edit(&s, "alice", NOW, "t-aaaaaa", e.clone()).unwrap();
        assert!(!c.owner);
        assert_eq!(t.body.as_deref(), Some("why and how"));
        let (c, _) = edit(&s, "bob", NOW, "t-aaaaaa", e).unwrap();
        assert!(c.owner);
        assert_eq!(c.events[0].actor, OWNER);
    }

    #[test]
    fn an_edit_refuses_bad_links_cycles_and_no_change() {
        let mut s = snap_with(&["t-aaaaaa", "t-bbbbbb"]);
        let bad = Edit {
            links: vec!["not a url".into()],
            ..Edit::default()
        };
        assert_eq!(
            edit(&s, "alice", NOW, "t-aaaaaa", bad).unwrap_err().code,
            Code::Usage
        );
        assert_eq!(
            edit(&s, "alice", NOW, "t-aaaaaa", Edit::default())
                .unwrap_err()
                .code,
            Code::Usage
        );
        let dep = |d: &str| Edit {
            depends_on: Some(vec![d.to_string()]),
            ..Edit::default()
        };
        let (_, t) = edit(&s, "alice", NOW, "t-aaaaaa", dep("t-bbbbbb")).unwrap();
        s.todos.insert(t.id.clone(), t);
        assert_eq!(
            edit(&s, "alice", NOW, "t-bbbbbb", dep("t-aaaaaa"))
                .unwrap_err()
                .code,
            Code::Usage
        );
        assert_eq!(
            edit(&s, "alice", NOW, "t-aaaaaa", dep("t-aaaaaa"))
                .unwrap_err()
                .code,
            Code::Usage
        );
    }
}
