//! `loopx web pair`: enrolls a phone through the pairing channel (built on the devices branch).

use super::{Ctx, Out};
use crate::kernel::{Error, Result};

/// `loopx web pair`: not built yet on this branch.
pub fn run(_ctx: &Ctx, _name: Option<String>, _url: Option<String>, _json: bool) -> Result<Out> {
    Err(Error::usage("loopx web pair is not built yet"))
}
