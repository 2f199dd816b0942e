//! The commit protocol, written once for every store: an owner change is signed (its gate
//! decisions over the journal's head, `owner.proofs` grown, the seal of the state it leaves);
//! an agent's change passes as it is. A store's commit is: lock, prepare, persist.

use crate::kernel::authority::OwnerPub;
use crate::kernel::ops::{Change, Write};
use crate::kernel::seal::Mark;
use crate::kernel::{Code, Error, EventDraft, Gate, Result, Snapshot};
use crate::store::core::owner::{self, KeyAt, OwnerKey};
use crate::store::core::{decisions, seal};

/// What `prepare` reads of the state a change was decided on, each only when it needs it.
pub trait Before {
    /// The snapshot the change was decided on.
    fn snapshot(&mut self) -> Result<&Snapshot>;
    /// The project's owner public key.
    fn owner_pub(&mut self) -> Result<Option<OwnerPub>>;
    /// The hash of the journal's last line (`GENESIS` when empty): what decisions are signed over.
    fn head(&mut self) -> Result<String>;
    /// The journal's last line as the seal marks it.
    fn mark(&mut self) -> Result<Option<Mark>>;
    /// The state as stored, before the seal: what an owner adopts.
    fn raw(&mut self) -> Result<Snapshot>;
    /// The text of `owner.proofs`, if there is one.
    fn proofs(&mut self) -> Result<Option<String>>;
    /// Every decided gate (to rebuild `owner.proofs` when it is missing or invalid).
    fn decided(&mut self) -> Result<Vec<Gate>>;
    /// The refusal of an owner change on a state without a valid seal (`None`: it may go on).
    fn unsealed(&mut self) -> Option<Error>;
}

/// A change ready to persist: its writes (decisions signed), the owner's documents to write
/// beside them, the journal lines to append, and the key that signs those lines.
pub struct Prepared {
    /// The records to write.
    pub writes: Vec<Write>,
    /// The owner's documents, by name (`owner.proofs`, `owner.seal`).
    pub docs: Vec<(&'static str, String)>,
    /// The journal lines, in order.
    pub events: Vec<EventDraft>,
    /// The owner's key, for an owner change: it signs each journal line.
    pub signer: Option<OwnerKey>,
}

/// Prepares `change` on the state `before`; an owner change is refused (exit 7, nothing
/// written) without the owner's key at `key`.
pub fn prepare(change: Change, before: &mut dyn Before, key: &KeyAt) -> Result<Prepared> {
    if change.events.is_empty() && !change.writes.is_empty() {
        return Err(Error::new(
            Code::Internal,
            "a change with files but no journal line",
        ));
    }
    if !change.owner {
        return Ok(Prepared {
            writes: change.writes,
            docs: Vec::new(),
            events: change.events,
            signer: None,
        });
    }
    let k = owner::signer_for(key, before.owner_pub()?.as_ref())?;
    let head = before.head()?;
    let (writes, decided) = seal::sign_decisions(change.writes, &k, &head);
    let change = Change { writes, ..change };
    let mut docs = Vec::new();
    if !decided.is_empty() {
        let kept = before.proofs()?;
        let gates = before.decided()?;
        let text = decisions::decisions_text(&k, kept.as_deref(), gates.iter(), decided);
        docs.push(("owner.proofs", text));
    }
    let unsealed = before.snapshot()?.seal.is_none() && !change.adopt_files;
    if unsealed && let Some(e) = before.unsealed() {
        return Err(e);
    }
    let mark = before.mark()?;
    let snap = before.snapshot()?;
    let prior = snap.seal.clone();
    // Without a valid seal, or to adopt them, the owner seals the files as they are.
    let base = match &prior {
        Some(_) if !change.adopt_files => snap.clone(),
        _ => before.raw()?,
    };
    let text = seal::seal_text(&k, &base, prior.as_ref(), &change, mark)?;
    docs.push(("owner.seal", text));
    Ok(Prepared {
        writes: change.writes,
        docs,
        events: change.events,
        signer: Some(k),
    })
}
