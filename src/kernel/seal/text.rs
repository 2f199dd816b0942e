//! The seal's text: the lines the signature covers, and their parse.

use crate::kernel::authority::OwnerPub;
use crate::kernel::model::GoalStatus;

use super::{HEADER, LeaseFact, Mark, Purpose, Seal, SealedCheck, SealedGate};
use super::{is_sha256, journaled, status_str};

impl Seal {
    /// The text the signature covers: every line of the file but the header and `sig`.
    pub fn body(&self) -> String {
        let mut s = String::from("seal 1\n");
        if let Some(m) = &self.journal {
            s.push_str(&format!("journal {} {} {}\n", m.seq, m.offset, m.hash));
        }
        if let Some((id, st)) = &self.goal {
            s.push_str(&format!("goal {id} {}\n", status_str(*st)));
        }
        if let Some((slots, w, mi)) = self.quota {
            s.push_str(&format!("quota {slots} {w} {mi}\n"));
        }
        if let Some((t, c)) = self.budget {
            let t = t.map_or("-".to_string(), |t| t.to_string());
            let c = c.map_or("-".to_string(), |c| c.to_string());
            s.push_str(&format!("budget {t} {c}\n"));
        }
        for (id, g) in &self.gates {
            let blocks = if g.blocks.is_empty() {
                "-".to_string()
            } else {
                g.blocks.join(",")
            };
            s.push_str(&format!("gate {id} {} {blocks}\n", g.hash));
        }
        for id in &self.users {
            s.push_str(&format!("user {id}\n"));
        }
        for (id, by) in &self.blocked {
            s.push_str(&format!("blocked {id} {by}\n"));
        }
        for (id, f) in &self.leases {
            let h = f.holder.as_deref().unwrap_or("-");
            s.push_str(&format!("lease {id} {} {h}\n", f.fence));
        }
        for (id, c) in &self.checks {
            // A line from before purposes keeps its old form: the signature covers it so.
            match c.purpose {
                Some(p) => s.push_str(&format!("check {id} {} {}\n", c.sha256, p.as_str())),
                None => s.push_str(&format!("check {id} {}\n", c.sha256)),
            }
        }
        for (event, hash) in &self.hooks {
            s.push_str(&format!("hook {event} {hash}\n"));
        }
        for (id, f) in &self.agents {
            let (slots, caps) = crate::kernel::agents::fact_fields(f);
            s.push_str(&format!("agent {id} {slots} {caps}\n"));
        }
        for (name, key) in &self.devices {
            s.push_str(&format!("device {name} {key}\n"));
        }
        for key in &self.revoked {
            s.push_str(&format!("revoked {key}\n"));
        }
        if let Some(n) = self.breaker {
            s.push_str(&format!("breaker {n}\n"));
        }
        journaled::body_lines(self, &mut s);
        s
    }

    /// The file's text with its signature.
    pub fn text(&self, sig: &str) -> String {
        format!("{HEADER}\n{}sig {sig}\n", self.body())
    }
    /// Parses `owner.seal` and checks its signature; `Err` says why it is not the owner's.
    pub fn parse(text: &str, key: &OwnerPub) -> Result<Seal, String> {
        let mut seal = Seal::default();
        let mut sig = None;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line == "seal 1" {
                continue;
            }
            let f: Vec<&str> = line.split(' ').collect();
            let bad = || format!("line {}: `{line}` is not a seal line", n + 1);
            if let ["sig", s] = f.as_slice() {
                sig = Some(s.to_string());
                continue;
            }
            let known = match seal.head_line(&f) {
                Some(false) => seal.id_line(&f),
                other => other,
            };
            match known {
                Some(true) => {}
                Some(false) if journaled::parse_line(&f, &mut seal) == Some(true) => {}
                _ => return Err(bad()),
            }
        }
        let sig = sig.ok_or("it has no signature")?;
        if !key.verify(&seal.body(), &sig) {
            return Err(
                "its signature is not the owner's (edited, or made with another key)".into(),
            );
        }
        // The default's `*` line only ever approved a done: an old one without a purpose is that.
        if let Some(c) = seal.checks.get_mut(crate::kernel::proof::DEFAULT_ID) {
            c.purpose.get_or_insert(Purpose::Done);
        }
        Ok(seal)
    }

    /// A line of the project's own facts: Some(true) read, Some(false) not one, None malformed.
    fn head_line(&mut self, f: &[&str]) -> Option<bool> {
        match f {
            ["journal", seq, off, h] => {
                let (seq, offset) = (seq.parse().ok()?, off.parse().ok()?);
                let hash = h.to_string();
                self.journal = Some(Mark { seq, offset, hash });
            }
            ["goal", .., st] if f.len() >= 3 => {
                let id = f[1..f.len() - 1].join(" ");
                self.goal = Some((id, status_of(st)?));
            }
            ["quota", s, w, m] => {
                self.quota = Some((s.parse().ok()?, w.parse().ok()?, m.parse().ok()?));
            }
            ["budget", t, c] => {
                let t = (*t != "-").then(|| t.parse::<u64>()).transpose();
                let c = (*c != "-").then(|| c.parse::<f64>()).transpose();
                self.budget = Some((t.ok()?, c.ok()?));
            }
            ["breaker", n] => self.breaker = Some(n.parse().ok()?),
            _ => return Some(false),
        }
        Some(true)
    }

    /// A line about one gate, todo, hook or agent: as `head_line`.
    fn id_line(&mut self, f: &[&str]) -> Option<bool> {
        match f {
            ["gate", id, h, b] => {
                let blocks = match *b {
                    "-" => Vec::new(),
                    b => b.split(',').map(str::to_string).collect(),
                };
                let hash = h.to_string();
                self.gates
                    .insert(id.to_string(), SealedGate { hash, blocks });
            }
            ["blocked", id, by] => {
                self.blocked.insert(id.to_string(), by.to_string());
            }
            ["user", id] => {
                self.users.insert(id.to_string());
            }
            ["hook", event, hash] => {
                self.hooks.insert(event.to_string(), hash.to_string());
            }
            ["lease", id, fence, h] => {
                let holder = (*h != "-").then(|| h.to_string());
                let fence = fence.parse().ok()?;
                self.leases
                    .insert(id.to_string(), LeaseFact { fence, holder });
            }
            ["device", name, key] => {
                self.devices.insert(name.to_string(), key.to_string());
            }
            ["revoked", key] => {
                self.revoked.insert(key.to_string());
            }
            ["agent", id, slots, caps] => {
                let f = crate::kernel::agents::parse_fields(slots, caps)?;
                self.agents.insert(id.to_string(), f);
            }
            ["check", id, h, rest @ ..] if is_sha256(h) && rest.len() <= 1 => {
                let purpose = match rest.first() {
                    Some(p) => Some(Purpose::parse(p)?),
                    None => None,
                };
                let sha256 = h.to_string();
                self.checks
                    .insert(id.to_string(), SealedCheck { sha256, purpose });
            }
            _ => return Some(false),
        }
        Some(true)
    }
}

fn status_of(s: &str) -> Option<GoalStatus> {
    match s {
        "active" => Some(GoalStatus::Active),
        "paused" => Some(GoalStatus::Paused),
        "complete" => Some(GoalStatus::Complete),
        _ => None,
    }
}
