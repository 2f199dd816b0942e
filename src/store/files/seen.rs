//! Who wrote the journal and when, read fast: each line's `at` and `actor` found by position,
//! without a full JSON parse (the roster's source); the few lines that record a lapsed lease
//! are parsed whole.

use std::io::{Read, Seek, SeekFrom};

use crate::kernel::roster::Seen;
use crate::kernel::{Error, Result};
use crate::store::core::seen::seen_in;
use crate::store::{FileStore, atomic};

/// The most bytes of the journal's end the roster reads.
pub const SEEN_MAX_BYTES: u64 = 32 * 1024 * 1024;

impl FileStore {
    /// Every actor of the journal's last `SEEN_MAX_BYTES`, the time of its latest line, and the
    /// lapsed leases those lines record.
    pub fn journal_seen(&self) -> Result<Seen> {
        let p = self.journal_path();
        let mut f = match atomic::open_nofollow(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Seen::default()),
            Err(e) => return Err(Error::io(&p, &e)),
        };
        let len = f.metadata().map_err(|e| Error::io(&p, &e))?.len();
        let start = len.saturating_sub(SEEN_MAX_BYTES);
        let mut bytes = Vec::with_capacity(usize::try_from(len - start).unwrap_or(0));
        f.seek(SeekFrom::Start(start))
            .and_then(|_| f.take(SEEN_MAX_BYTES).read_to_end(&mut bytes))
            .map_err(|e| Error::io(&p, &e))?;
        // A read that starts mid-file drops its first, partial line.
        let body = if start > 0 {
            bytes
                .iter()
                .position(|b| *b == b'\n')
                .map_or(&bytes[..0], |i| &bytes[i + 1..])
        } else {
            &bytes[..]
        };
        Ok(seen_in(body))
    }
}
