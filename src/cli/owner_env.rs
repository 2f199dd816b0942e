//! The owner key's variable: read once as loopx starts, then wiped from its own environment.
//!
//! Removing a variable (`unsetenv`) only drops it from the list a program reads: the kernel's
//! copy, which any process of the same user reads at `/proc/PID/environ`, keeps the original
//! text. So the text itself is overwritten too, and a command loopx runs cannot find the key's
//! name in its parent (docs/security.md, "Keeping the key out of an agent's sandbox").

use std::ffi::OsString;
use std::sync::OnceLock;

/// The variable that names the owner's secret key file.
pub const VAR: &str = "LOOPX_OWNER_KEY";

/// The value read at start (`None` inside: it was not set); unset: [`take_at_start`] never ran.
static TAKEN: OnceLock<Option<OsString>> = OnceLock::new();

unsafe extern "C" {
    /// The C library's list of `NAME=value` strings (POSIX).
    static environ: *const *mut libc::c_char;
}

/// Reads [`VAR`] for [`value`], then removes it from this process's environment and overwrites
/// its text where the process started with it.
///
/// # Safety
///
/// No other thread may run: it changes the process's environment (call it first in `main`).
pub unsafe fn take_at_start() {
    let value = std::env::var_os(VAR);
    if value.is_some() {
        // SAFETY: the caller's promise: no other thread reads or writes the environment.
        unsafe { wipe() };
    }
    let _ = TAKEN.set(value);
}

/// The owner key's variable as loopx started: what [`take_at_start`] read, else (loopx used as a
/// library) the environment's.
pub fn value() -> Option<OsString> {
    match TAKEN.get() {
        Some(v) => v.clone(),
        None => std::env::var_os(VAR),
    }
}

/// Removes [`VAR`] and zeroes the bytes of each `VAR=...` string the environment held.
///
/// # Safety
///
/// As [`take_at_start`].
unsafe fn wipe() {
    let prefix = format!("{VAR}=");
    let mut found: Vec<(*mut libc::c_char, usize)> = Vec::new();
    // SAFETY: `environ` is a NULL-terminated array of NUL-terminated strings, and nothing
    // changes it meanwhile (the caller's promise).
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            let s = std::ffi::CStr::from_ptr(*p);
            if s.to_bytes().starts_with(prefix.as_bytes()) {
                found.push((*p, s.to_bytes().len()));
            }
            p = p.add(1);
        }
        // The list first: `unsetenv` drops the pointers, never the strings they point to.
        std::env::remove_var(VAR);
        // Then the text: the strings the process started with are its own writable memory, and
        // nothing points to them any more.
        for (s, len) in found {
            std::ptr::write_bytes(s, 0, len);
        }
    }
}
