//! Gate proofs: a decided gate is the owner's when `owner.proofs` lists its decision or its own
//! signature verifies; `owner.proofs` grows by each owner change that decides gates.

use std::collections::BTreeSet;

use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::{Config, Gate, GateStatus};
use crate::store::core::owner::OwnerKey;

/// True when a gate's state is the owner's: pending, listed in `owner.proofs`, signed itself, or
/// signed by one of the config's devices in a project with an owner key (the seal decides which count).
pub fn gate_signed_by(
    g: &Gate,
    proofs: &BTreeSet<String>,
    key: Option<&OwnerPub>,
    cfg: &Config,
) -> bool {
    g.status == GateStatus::Pending
        || authority::decision_hash(g).is_some_and(|h| proofs.contains(&h))
        || authority::gate_signed(g, key)
        || key.is_some() && crate::kernel::device::gate_signed(g, &cfg.devices, &cfg.goal.id)
}

/// `owner.proofs` with the decisions `new` added, signed again: `kept` is the file's text (if
/// any); a missing or invalid one is rebuilt from every decided gate whose own signature verifies.
pub fn decisions_text<'a>(
    key: &OwnerKey,
    kept: Option<&str>,
    decided: impl Iterator<Item = &'a Gate>,
    new: Vec<String>,
) -> String {
    let public = key.public();
    let mut hashes = kept
        .and_then(|t| authority::parse_decisions(t, &public))
        .unwrap_or_default();
    if hashes.is_empty() {
        hashes.extend(
            decided
                .filter(|g| {
                    g.status != GateStatus::Pending && authority::gate_signed(g, Some(&public))
                })
                .filter_map(authority::decision_hash),
        );
    }
    hashes.extend(new);
    let sig = key.sign(&authority::decisions_message(&hashes));
    authority::decisions_text(&hashes, &sig)
}
