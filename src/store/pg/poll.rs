//! The poll lock on a database: a session advisory lock on a connection of its own, held while
//! `monitor poll` runs checks and released when that connection closes (the process ends).

use super::{PgStore, db_error};
use crate::kernel::Result;
use crate::store::PollLock;

/// The advisory lock key of `monitor poll` ("looppl"); advisory locks are per database.
pub const POLL_LOCK: i64 = 0x6c6f_6f70_706c;

/// A held poll lock: the connection that holds it.
struct Held {
    client: postgres::Client,
}

impl PollLock for Held {
    fn held(&mut self) -> bool {
        // A session's advisory lock lasts as long as its connection; one that still answers
        // still holds it.
        !self.client.is_closed() && self.client.simple_query("SELECT 1").is_ok()
    }
}

impl PgStore {
    /// Takes the poll lock on a new connection, or `None` when another poll holds it.
    pub(crate) fn try_poll_lock(&self) -> Result<Option<Box<dyn PollLock>>> {
        let mut client = Self::connect(&self.url)?;
        let got: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&POLL_LOCK])
            .map_err(db_error)?
            .get(0);
        Ok(got.then(|| Box::new(Held { client }) as Box<dyn PollLock>))
    }
}
