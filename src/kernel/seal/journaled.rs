//! Facts agents may add but a hand edit must not undo: every lease and the window's spends (in
//! the seal, as `held` and `spend` lines), and what the journal's lines after the seal say of
//! leases, spends, `user` todos and gates' blocks. A file that disagrees is named, and loopx acts
//! on the seal and the journal.

use std::collections::{BTreeMap, BTreeSet};

use crate::kernel::model::{Event, HeldFact, Lease, Role, Seal, Snapshot, Spend};
use crate::kernel::time::Ts;

/// A todo's lease as the seal and the journal after it last left it.
#[derive(Debug, Clone, PartialEq)]
enum LeaseTruth {
    /// Held by `holder` at `fence` until `expires_at` (unknown for an owner's reassign line).
    Held {
        holder: String,
        fence: u64,
        at: Ts,
        expires_at: Option<Ts>,
        seq: Option<u64>,
    },
    /// Released, finished, expired or otherwise let go at `fence`.
    Free { fence: u64, seq: u64 },
}

/// What the journal's lines after the seal say (agents wrote them; a file must not undo them).
#[derive(Debug, Default)]
pub struct Journaled {
    /// `user` todos added, with the line that added each.
    users: BTreeMap<String, u64>,
    /// Todos each gate blocks (its `gate.open`, and todos added to it), with the line.
    blocks: BTreeMap<String, BTreeMap<String, u64>>,
    /// The last lease event of each todo.
    leases: BTreeMap<String, LeaseTruth>,
    /// `quota.spend` lines.
    spends: Vec<Spend>,
}

/// Bytes that mark a line this module reads; other lines are not parsed.
const WANTED: [&[u8]; 4] = [
    b"\"action\":\"todo.",
    b"\"action\":\"gate.open\"",
    b"\"action\":\"quota.spend\"",
    b"\"action\":\"lease.expire\"",
];

fn has(line: &[u8], w: &[u8]) -> bool {
    line.windows(w.len()).any(|x| x == w)
}

/// True for a line that may carry a fact: most lines (updates, edits, plain adds) do not, and
/// are not parsed.
fn wanted(line: &[u8]) -> bool {
    if has(line, b"\"action\":\"todo.add\"") {
        return has(line, b"\"role\":\"user\"") || has(line, b"\"gate\":\"");
    }
    if has(line, b"\"action\":\"todo.update\"") || has(line, b"\"action\":\"todo.edit\"") {
        return false;
    }
    WANTED.iter().any(|w| has(line, w))
}

impl Journaled {
    /// Reads the journal from the sealed line on (`since`): only lines that may carry a fact.
    pub fn read(since: &[u8]) -> Journaled {
        let mut j = Journaled::default();
        for line in since.split(|b| *b == b'\n').filter(|l| wanted(l)) {
            if let Ok(e) = serde_json::from_slice::<Event>(line) {
                j.add(&e);
            }
        }
        j
    }

    fn add(&mut self, e: &Event) {
        match e.action.as_str() {
            "todo.add" | "gate.open" | "quota.spend" => self.add_fact(e),
            _ => self.add_lease(e),
        }
    }

    /// A `user` todo, the todos a gate blocks, or a spend.
    fn add_fact(&mut self, e: &Event) {
        let d = &e.data;
        let s = |k: &str| d.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let target = e.target.clone();
        match e.action.as_str() {
            "todo.add" => {
                if s("role").as_deref() == Some("user") {
                    self.users.insert(target.clone(), e.seq);
                }
                if let Some(g) = s("gate") {
                    self.blocks.entry(g).or_default().insert(target, e.seq);
                }
            }
            "gate.open" => {
                let list = d.get("blocks").and_then(|v| v.as_array());
                let b = self.blocks.entry(target).or_default();
                for t in list.into_iter().flatten().filter_map(|v| v.as_str()) {
                    b.insert(t.to_string(), e.seq);
                }
            }
            _ => self.spends.push(Spend {
                at: e.at,
                agent: e.actor.clone(),
                slots: d.get("slots").and_then(|v| v.as_u64()).unwrap_or(1) as u32,
                turn: s("turn"),
                tokens: d.get("tokens").and_then(|v| v.as_u64()),
                cost_usd: d.get("cost_usd").and_then(|v| v.as_f64()),
                extra: Default::default(),
            }),
        }
    }

    /// A lease taken, passed on or let go.
    fn add_lease(&mut self, e: &Event) {
        let d = &e.data;
        let fence = d.get("fence").and_then(serde_json::Value::as_u64);
        let expires = d
            .get("expires_at")
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        let held = |holder: String, fence: u64| LeaseTruth::Held {
            holder,
            fence,
            at: e.at,
            expires_at: expires,
            seq: Some(e.seq),
        };
        let target = e.target.clone();
        match e.action.as_str() {
            "todo.claim" | "todo.renew" => {
                if let Some(f) = fence {
                    self.leases.insert(target, held(e.actor.clone(), f));
                }
            }
            "todo.handoff" | "todo.reassign" => {
                let to = d.get("to").and_then(|v| v.as_str()).map(str::to_string);
                if let (Some(f), Some(to)) = (fence, to) {
                    self.leases.insert(target, held(to, f));
                }
            }
            "todo.release"
            | "todo.done"
            | "todo.done_recurring"
            | "todo.cancel"
            | "todo.block"
            | "todo.defer"
            | "todo.reopen"
            | "lease.expire" => {
                let fence = fence.or_else(|| self.fence_of(&target)).unwrap_or(0);
                let seq = e.seq;
                self.leases.insert(target, LeaseTruth::Free { fence, seq });
            }
            _ => {}
        }
    }

    fn fence_of(&self, id: &str) -> Option<u64> {
        match self.leases.get(id)? {
            LeaseTruth::Held { fence, .. } | LeaseTruth::Free { fence, .. } => Some(*fence),
        }
    }
}

/// Every lease of the snapshot, as the seal holds it.
pub fn held_facts(snap: &Snapshot) -> BTreeMap<String, HeldFact> {
    let plain = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
    snap.todos
        .iter()
        .filter(|(id, _)| plain(id))
        .filter_map(|(id, t)| {
            let l = t.lease.as_ref().filter(|l| plain(&l.holder))?;
            let f = HeldFact {
                fence: l.fence,
                holder: l.holder.clone(),
                expires_at: l.expires_at.0,
            };
            Some((id.clone(), f))
        })
        .collect()
}

/// The spends of the window, as the seal holds them: those younger than the window before the
/// newest (older ones count for nothing), oldest first.
pub fn spend_facts(snap: &Snapshot) -> Vec<Spend> {
    let q = &snap.config.quota;
    let newest = snap.quota.spends.iter().map(|s| s.at).max();
    let plain = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
    let mut v: Vec<Spend> = snap
        .quota
        .spends
        .iter()
        .filter(|s| newest.is_some_and(|n| s.at.0 > n.0 - q.window.0) && plain(&s.agent))
        .map(|s| Spend {
            turn: None,
            extra: Default::default(),
            ..s.clone()
        })
        .collect();
    v.sort_by(|a, b| (a.at, &a.agent, a.slots).cmp(&(b.at, &b.agent, b.slots)));
    v
}

/// The seal's `held` and `spend` lines.
pub fn body_lines(seal: &Seal, s: &mut String) {
    for (id, h) in &seal.held {
        s.push_str(&format!(
            "held {id} {} {} {}\n",
            h.fence, h.holder, h.expires_at
        ));
    }
    for sp in &seal.spends {
        let t = sp.tokens.map_or("-".to_string(), |t| t.to_string());
        let c = sp.cost_usd.map_or("-".to_string(), |c| c.to_string());
        s.push_str(&format!(
            "spend {} {} {} {t} {c}\n",
            sp.at.0, sp.agent, sp.slots
        ));
    }
}

/// Parses a `held` or `spend` line into the seal; `None` when the line is neither, `Some(false)`
/// when it is one but malformed.
pub fn parse_line(f: &[&str], seal: &mut Seal) -> Option<bool> {
    match f {
        ["held", id, fence, holder, exp] => {
            let (Ok(fence), Ok(expires_at)) = (fence.parse(), exp.parse()) else {
                return Some(false);
            };
            let h = HeldFact {
                fence,
                holder: holder.to_string(),
                expires_at,
            };
            seal.held.insert(id.to_string(), h);
            Some(true)
        }
        ["spend", at, agent, slots, t, c] => {
            let t = (*t != "-").then(|| t.parse::<u64>()).transpose();
            let c = (*c != "-").then(|| c.parse::<f64>()).transpose();
            let (Ok(at), Ok(slots), Ok(tokens), Ok(cost_usd)) = (at.parse(), slots.parse(), t, c)
            else {
                return Some(false);
            };
            seal.spends.push(Spend {
                at: Ts(at),
                agent: agent.to_string(),
                slots,
                turn: None,
                tokens,
                cost_usd,
                extra: Default::default(),
            });
            Some(true)
        }
        _ => None,
    }
}

/// A file that disagrees with the seal or the journal after it: the file (in `.loopx/`) and
/// what loopx acts on instead.
pub type Disagreement = (String, String);

/// Acts on the seal's leases and spends and on what the journal after it says, where a file
/// disagrees; returns each disagreement.
pub fn apply(snap: &mut Snapshot, seal: &Seal, j: &Journaled) -> Vec<Disagreement> {
    let mut out = Vec::new();
    apply_users(snap, j, &mut out);
    apply_blocks(snap, j, &mut out);
    apply_leases(snap, seal, j, &mut out);
    apply_spends(snap, seal, j, &mut out);
    out
}

fn apply_users(snap: &mut Snapshot, j: &Journaled, out: &mut Vec<Disagreement>) {
    for (id, n) in &j.users {
        if let Some(t) = snap.todos.get_mut(id)
            && t.role != Role::User
        {
            out.push((
                format!("todos/{id}.toml"),
                format!("todos/{id}.toml says role agent, but it was added as a user todo (journal.jsonl:{n}): not offered to agents"),
            ));
            t.role = Role::User;
        }
    }
}

fn apply_blocks(snap: &mut Snapshot, j: &Journaled, out: &mut Vec<Disagreement>) {
    for (gid, todos) in &j.blocks {
        let Some(g) = snap.gates.get_mut(gid) else {
            continue;
        };
        for (t, n) in todos {
            if !g.blocks.contains(t) {
                out.push((
                    format!("gates/{gid}.toml"),
                    format!("gates/{gid}.toml no longer blocks {t}, which the journal says it does (journal.jsonl:{n}): it still blocks it"),
                ));
                g.blocks.push(t.clone());
            }
        }
    }
}

/// The lease each todo has by the seal and the journal after it (the journal's is later).
fn lease_truths(seal: &Seal, j: &Journaled) -> BTreeMap<String, LeaseTruth> {
    let mut all: BTreeMap<String, LeaseTruth> = seal
        .held
        .iter()
        .map(|(id, h)| {
            let t = LeaseTruth::Held {
                holder: h.holder.clone(),
                fence: h.fence,
                at: Ts(0),
                expires_at: Some(Ts(h.expires_at)),
                seq: None,
            };
            (id.clone(), t)
        })
        .collect();
    all.extend(j.leases.iter().map(|(k, v)| (k.clone(), v.clone())));
    all
}

fn apply_leases(snap: &mut Snapshot, seal: &Seal, j: &Journaled, out: &mut Vec<Disagreement>) {
    let ttl = snap.config.lease.ttl;
    for (id, truth) in lease_truths(seal, j) {
        let Some(t) = snap.todos.get_mut(&id) else {
            continue;
        };
        let file = format!("todos/{id}.toml");
        let held = t.lease.as_ref().map(|l| (l.fence, l.holder.clone()));
        match truth {
            LeaseTruth::Held {
                holder,
                fence,
                at,
                expires_at,
                seq,
            } => {
                if held.as_ref() == Some(&(fence, holder.clone())) && t.fence == fence {
                    continue;
                }
                let now_says = match &held {
                    Some((f, h)) => format!("{h} at fence {f}"),
                    None => format!("no lease at fence {}", t.fence),
                };
                let src = seq.map_or("the owner's seal".to_string(), |n| {
                    format!("journal.jsonl:{n}")
                });
                out.push((file.clone(), format!(
                    "{file} says {now_says}, but {holder} holds fence {fence} ({src}): acting on that lease"
                )));
                let expires_at = expires_at.unwrap_or(at.add(ttl));
                restore(t, holder, fence, at, expires_at);
            }
            LeaseTruth::Free { fence, seq } => {
                if let Some((f, h)) = held.filter(|(f, _)| *f <= fence) {
                    out.push((file.clone(), format!(
                        "{file} says {h} holds fence {f}, but that lease was let go (journal.jsonl:{seq}): it counts as free"
                    )));
                    t.lease = None;
                }
            }
        }
    }
}

/// Puts back the lease the seal or the journal says, keeping the file's reservation fields.
fn restore(t: &mut crate::kernel::model::Todo, holder: String, fence: u64, at: Ts, exp: Ts) {
    t.fence = fence;
    match t.lease.as_mut() {
        Some(l) => {
            l.holder = holder;
            l.fence = fence;
            l.expires_at = l.expires_at.min(exp);
        }
        None => t.lease = Some(Box::new(Lease::new(holder, fence, at, exp))),
    }
}

/// The spends count as the file's, the seal's and the journal's together: a spend removed or
/// moved by hand still counts where the seal or the journal has it.
fn apply_spends(snap: &mut Snapshot, seal: &Seal, j: &Journaled, out: &mut Vec<Disagreement>) {
    type Key = (i64, String, u32);
    let key = |s: &Spend| (s.at.0, s.agent.clone(), s.slots);
    let count = |v: &[Spend]| {
        let mut m: BTreeMap<Key, usize> = BTreeMap::new();
        for s in v {
            *m.entry(key(s)).or_default() += 1;
        }
        m
    };
    let in_file = count(&snap.quota.spends);
    let mut missing: Vec<Spend> = Vec::new();
    let mut seen: BTreeSet<Key> = BTreeSet::new();
    for src in [&seal.spends, &j.spends] {
        let c = count(src);
        for s in src {
            let k = key(s);
            let have = in_file.get(&k).copied().unwrap_or(0)
                + missing.iter().filter(|m| key(m) == k).count();
            if have < c[&k] && seen.insert(k.clone()) {
                for _ in have..c[&k] {
                    missing.push(s.clone());
                }
            }
        }
    }
    if missing.is_empty() {
        return;
    }
    out.push((
        "quota.toml".to_string(),
        format!(
            "quota.toml lacks {} spend(s) the owner's seal or the journal records (the first by {} at {}): they still count",
            missing.len(),
            missing[0].agent,
            missing[0].at
        ),
    ));
    snap.quota.spends.extend(missing);
    snap.quota.spends.sort_by_key(|s| s.at);
}
