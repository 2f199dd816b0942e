//! Reading the logs (the journal, evidence) for the faces.

pub use crate::store::JournalCheck;
use std::io::{Read, Seek, SeekFrom};

use crate::kernel::{Error, Event, Result};
use crate::store::fs::FileStore;
use crate::store::journal;
use crate::store::{atomic, tx};

/// The most bytes one `journal_after` call reads.
const FOLLOW_CHUNK: u64 = 1 << 20;

impl FileStore {
    /// Checks the whole journal's chain under the shared lock.
    pub fn verify_journal(&self) -> Result<JournalCheck> {
        let p = self.journal_path();
        let _g = self.lock(false)?;
        let mut bytes = Vec::new();
        match atomic::open_nofollow(&p) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).map_err(|e| Error::io(&p, &e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(crate::store::parse::io_error(&p, &e)),
        }
        let (broken, torn) = journal::verify(&bytes);
        let lines = bytes.iter().filter(|b| **b == b'\n').count();
        Ok(JournalCheck {
            lines,
            torn,
            broken,
        })
    }

    /// Where the journal's committed lines end now: where following starts.
    pub fn journal_end(&self) -> Result<u64> {
        let p = self.journal_path();
        let _g = self.lock(false)?;
        tx::clean_len(&p).map_err(|e| Error::io(&p, &e))
    }

    /// The committed events after byte `offset`, and the offset to read from next. Lines of a
    /// transaction whose commit line is not there yet are held back. A journal shorter than
    /// `offset` (replaced or cut) starts over at its end.
    pub fn journal_after(&self, offset: u64) -> Result<(Vec<Event>, u64)> {
        let p = self.journal_path();
        let _g = self.lock(false)?;
        let end = tx::clean_len(&p).map_err(|e| Error::io(&p, &e))?;
        if end < offset {
            return Ok((Vec::new(), end));
        }
        let mut f = atomic::open_nofollow(&p).map_err(|e| Error::io(&p, &e))?;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(&p, &e))?;
        let mut buf = Vec::new();
        f.take((end - offset).min(FOLLOW_CHUNK))
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(&p, &e))?;
        let mut events = Vec::new();
        let (mut pos, mut committed) = (offset, offset);
        let mut held = 0;
        for line in buf.split_inclusive(|b| *b == b'\n') {
            if line.last() != Some(&b'\n') {
                break;
            }
            pos += line.len() as u64;
            let Ok(ev) = serde_json::from_slice::<Event>(&line[..line.len() - 1]) else {
                continue;
            };
            let open_tx = ev.tx.is_some() && ev.files.is_none();
            events.push(ev);
            if open_tx {
                held += 1;
            } else {
                held = 0;
                committed = pos;
            }
        }
        events.truncate(events.len() - held);
        Ok((events, committed))
    }
}
