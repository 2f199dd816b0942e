//! What the board benches share.

/// The resident and peak memory, in kB, of the process in tmux pane `b`'s first window, as
/// `/proc/PID/status` gives `VmRSS` and `VmHWM`.
pub fn pane_memory(
    tmux: impl Fn(&[&str]) -> Result<std::process::Output, String>,
) -> Result<(u64, u64), String> {
    let pid = tmux(&["display", "-p", "-t", "b", "#{pane_pid}"])?;
    let pid = String::from_utf8_lossy(&pid.stdout).trim().to_string();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    let kb = |field: &str| {
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .ok_or_else(|| format!("no {field} in /proc/{pid}/status"))
    };
    Ok((kb("VmRSS:")?, kb("VmHWM:")?))
}
