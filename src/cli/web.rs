//! `web`: the web face's server for the owner's phone.

use super::args::WebArgs;
use super::{Ctx, Out};
use crate::kernel::{Error, Result};

/// Runs `loopx web`.
pub fn serve(_ctx: &Ctx, _args: WebArgs) -> Result<Out> {
    Err(Error::usage("`loopx web` is not built yet"))
}
