//! Owner authority: the exact texts the owner signs, and checking a signature against `owner.pub`.

use ed25519_dalek::{Signature, Verifier, VerifyingKey};

use crate::kernel::action::Action;
use crate::kernel::model::{Event, Gate, GateStatus};

/// The first line of `owner.pub`.
pub const PUB_HEADER: &str = "# loopx owner public key (ed25519, hex)";

/// The text a gate decision is signed over (see the contract): `v2` for a gate that holds an
/// action, whose kind and SHA-256 it covers too.
pub fn gate_message(g: &Gate, journal_head: &str) -> String {
    let (version, action) = match &g.action {
        Some(a) => ("v2", format!("\naction {} {}", a.kind.as_str(), a.sha256)),
        None => ("v1", String::new()),
    };
    format!(
        "loopx-gate-{version}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
        g.id,
        g.status.as_str(),
        g.option.as_deref().unwrap_or(""),
        g.reason.as_deref().unwrap_or(""),
        g.decided_at.map(|t| t.to_string()).unwrap_or_default(),
        g.decided_by.as_deref().unwrap_or(""),
        journal_head
    ) + &action
}

/// The text an owner's journal line is signed over: every field but `sig`.
///
/// A line of a transaction (with `tx`) also signs the transaction and the hash of every file it
/// writes, so the owner's signature proves the content of those files.
pub fn event_message(e: &Event) -> String {
    let mut m = format!(
        "loopx-event-v1\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
        e.seq,
        e.at,
        e.actor,
        e.action,
        e.target,
        serde_json::to_string(&e.data).unwrap_or_default(),
        e.prev
    );
    if let Some(tx) = e.tx {
        m.push_str(&format!(
            "\ntx {tx}\n{}",
            serde_json::to_string(&e.files).unwrap_or_default()
        ));
    }
    m
}

/// The strings of the owner's actions ([`Action::is_owner`]), for readers that match on text.
pub const OWNER_ACTIONS: &[&str] = &[
    Action::OwnerInit.as_str(),
    Action::OwnerSeal.as_str(),
    Action::GateApprove.as_str(),
    Action::GateReject.as_str(),
    Action::GateCancel.as_str(),
    Action::GoalPause.as_str(),
    Action::GoalResume.as_str(),
    Action::GoalComplete.as_str(),
    Action::QuotaSet.as_str(),
    Action::TodoReassign.as_str(),
    Action::CheckApprove.as_str(),
    Action::CheckRevoke.as_str(),
    Action::HookSet.as_str(),
    Action::HookRemove.as_str(),
    Action::AgentFix.as_str(),
    Action::DeviceEnroll.as_str(),
    Action::DeviceRevoke.as_str(),
];

/// The owner's public key, as read from `.loopx/owner.pub`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerPub(pub VerifyingKey);

impl OwnerPub {
    /// Parses `owner.pub`: comment lines, then 64 hex characters.
    pub fn parse(text: &str) -> Result<OwnerPub, String> {
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .ok_or("no key in the file")?;
        let bytes: [u8; 32] = from_hex(line)
            .and_then(|v| v.try_into().ok())
            .ok_or("the key must be 64 hex characters")?;
        VerifyingKey::from_bytes(&bytes)
            .map(OwnerPub)
            .map_err(|_| "not a valid ed25519 public key".to_string())
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        format!("{PUB_HEADER}\n{}\n", to_hex(self.0.as_bytes()))
    }

    /// A short fingerprint: `SHA256:` and 16 hex characters of the key's hash.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let d = sha2::Sha256::digest(self.0.as_bytes());
        format!("SHA256:{}", &to_hex(&d)[..16])
    }

    /// True when `sig_hex` is this key's signature over `msg`.
    pub fn verify(&self, msg: &str, sig_hex: &str) -> bool {
        let Some(bytes) = from_hex(sig_hex).and_then(|v| <[u8; 64]>::try_from(v).ok()) else {
            return false;
        };
        self.0
            .verify(msg.as_bytes(), &Signature::from_bytes(&bytes))
            .is_ok()
    }
}

/// True when a gate's decision is signed: pending, or signed by `key` over its own fields.
pub fn gate_signed(g: &Gate, key: Option<&OwnerPub>) -> bool {
    if g.status == GateStatus::Pending {
        return true;
    }
    match (key, &g.signature, &g.journal_head) {
        (Some(k), Some(sig), Some(head)) => k.verify(&gate_message(g, head), sig),
        _ => false,
    }
}

/// The gate that stands for a gate file loopx cannot read: pending and global, so every agent
/// todo waits until the file is fixed (fail closed).
pub fn unreadable_gate(id: &str, p: &crate::kernel::model::Problem) -> Gate {
    let question = format!(
        "{} cannot be read ({}); fix or restore it",
        p.at(),
        p.message
    );
    Gate {
        global: true,
        ..Gate::pending(id, question, "loopx", crate::kernel::Ts(0))
    }
}

/// True when an event's `sig` is the owner's signature over it.
pub fn event_signed(e: &Event, key: Option<&OwnerPub>) -> bool {
    match (key, &e.sig) {
        (Some(k), Some(sig)) => k.verify(&event_message(e), sig),
        _ => false,
    }
}

/// Lowercase hex of bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Bytes of a hex string, or None.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The first line of `owner.proofs`.
pub const PROOFS_HEADER: &str =
    "# loopx owner proofs: hashes of the gate decisions the owner signed, signed as a whole";

/// The hash that names one signed gate decision in `owner.proofs`.
pub fn decision_hash(g: &Gate) -> Option<String> {
    use sha2::Digest;
    let head = g.journal_head.as_deref()?;
    g.signature.as_ref()?;
    Some(to_hex(&sha2::Sha256::digest(
        gate_message(g, head).as_bytes(),
    )))
}

/// The text `owner.proofs` is signed over.
pub fn decisions_message(hashes: &std::collections::BTreeSet<String>) -> String {
    let mut s = String::from("loopx-proofs-v1");
    for h in hashes {
        s.push('\n');
        s.push_str(h);
    }
    s
}

/// The decision hashes of an `owner.proofs` text, or None unless `key` signed it.
pub fn parse_decisions(text: &str, key: &OwnerPub) -> Option<std::collections::BTreeSet<String>> {
    let mut sig = None;
    let mut hashes = std::collections::BTreeSet::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        match line.strip_prefix("sig ") {
            Some(s) => sig = Some(s.trim()),
            None => {
                hashes.insert(line.to_string());
            }
        }
    }
    key.verify(&decisions_message(&hashes), sig?)
        .then_some(hashes)
}

/// The text of `owner.proofs` for these hashes and their signature.
pub fn decisions_text(hashes: &std::collections::BTreeSet<String>, sig: &str) -> String {
    let mut s = format!("{PROOFS_HEADER}\nsig {sig}\n");
    for h in hashes {
        s.push_str(h);
        s.push('\n');
    }
    s
}
