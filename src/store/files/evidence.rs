//! Evidence across todos: every `evidence/ID.jsonl` scanned (never through a link), bounded.

pub use crate::store::Keep;
use std::fs;

use crate::kernel::{Code, Error, Evidence, Result};
use crate::store::{FileStore, atomic};

/// The most bytes of one evidence file read by a scan.
pub const FILE_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The most matching entries one scan keeps.
pub const KEEP_MAX: usize = 200_000;

impl FileStore {
    /// Every evidence entry `keep` accepts, as (todo id, entry), file by file (ids in order),
    /// oldest first within a file. `only` reads one todo's file. Lines that do not parse (a torn
    /// last line, a hand edit) are skipped; a link or anything but a regular file is refused.
    pub fn evidence_scan(
        &self,
        only: Option<&str>,
        keep: Keep<'_>,
    ) -> Result<Vec<(String, Evidence)>> {
        let ids = match only {
            Some(id) => {
                crate::kernel::id::check_not_path(id)?;
                vec![id.to_string()]
            }
            None => self.evidence_ids()?,
        };
        let mut out = Vec::new();
        for id in ids {
            let p = self.evidence_path(&id);
            let mut f = match atomic::open_nofollow(&p) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&p, &e)),
            };
            let bytes =
                atomic::read_bounded(&mut f, FILE_MAX_BYTES).map_err(|e| Error::io(&p, &e))?;
            for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let Ok(e) = serde_json::from_slice::<Evidence>(line) else {
                    continue;
                };
                if keep(&id, &e) {
                    if out.len() >= KEEP_MAX {
                        return Err(Error::new(
                            Code::Usage,
                            format!("more than {KEEP_MAX} evidence entries match"),
                        )
                        .hint(
                            "narrow the list with --todo, --agent, --kind, --metric or --since",
                        ));
                    }
                    out.push((id.clone(), e));
                }
            }
        }
        Ok(out)
    }

    /// The ids of every `evidence/ID.jsonl` (no dotfiles or temp files), sorted.
    fn evidence_ids(&self) -> Result<Vec<String>> {
        let dir = self.dir().join("evidence");
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&dir, &e)),
        };
        let mut ids = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| Error::io(&dir, &e))?;
            let name = entry.file_name();
            if let Some(id) = name
                .to_str()
                .filter(|n| !n.starts_with('.'))
                .and_then(|n| n.strip_suffix(".jsonl"))
                .filter(|n| crate::kernel::id::check_not_path(n).is_ok())
            {
                ids.push(id.to_string());
            }
        }
        ids.sort();
        Ok(ids)
    }
}
