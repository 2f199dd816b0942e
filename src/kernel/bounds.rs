//! Bounds: every limit on a value loopx reads or writes, as named constants, and the checks of
//! each state file's values. Pure: the store maps a violation to exit 6 with file and line, the
//! faces and ops map it to exit 2. The table in `docs/state-format.md` ("Bounds") lists them all.

use std::fmt;

use crate::kernel::error::{Error, Result};
use crate::kernel::model::{Check, Config, Evidence, Gate, Lease, QuotaFile, Spend, Todo};
use crate::kernel::time::Dur;

pub use crate::kernel::model::{TTL_MAX, TTL_MIN};

/// The most arguments of a command kept in evidence.
pub const ARGV_MAX: usize = 64;
/// The most characters of one argument kept in evidence.
pub const ARG_MAX: usize = 1_000;
/// The shortest quota window: 1 second.
pub const WINDOW_MIN: Dur = Dur(1000);
/// The longest quota window: 366 days.
pub const WINDOW_MAX: Dur = Dur(366 * 86_400_000);
/// The shortest cadence of a recurring todo: 1 second.
pub const EVERY_MIN: Dur = Dur(1000);
/// The longest cadence of a recurring todo: 366 days.
pub const EVERY_MAX: Dur = Dur(366 * 86_400_000);
/// The fewest slots in a quota window, and in one spend.
pub const SLOTS_MIN: u32 = 1;
/// The most slots in a quota window, and in one spend.
pub const SLOTS_MAX: u32 = 100_000;
/// The most spends `quota.toml` may hold.
pub const SPENDS_MAX: usize = 100_000;
/// The most tokens one spend may record.
pub const TOKENS_MAX: u64 = 1_000_000_000_000;
/// The most US dollars one spend may record.
pub const COST_USD_MAX: f64 = 1_000_000_000.0;
/// The smallest cost budget: one millionth of a dollar, what spends are summed in (a smaller one
/// counts as 0, a paused goal).
pub const COST_BUDGET_MIN: f64 = 0.000_001;
/// The highest fence: 2^53 - 1, so every fence is exact as a JSON number.
pub const FENCE_MAX: u64 = (1 << 53) - 1;
/// The most characters of a todo title, a success criterion or a goal id.
pub const TITLE_MAX: usize = 1_000;
/// The most characters of a long text: objective, question, reason, evidence text.
pub const TEXT_MAX: usize = 4_000;
/// The most characters of one gate option, a metric name or a turn id.
pub const NAME_MAX: usize = 200;
/// The most options of a gate.
pub const OPTIONS_MAX: usize = 20;
/// The most success criteria of a goal.
pub const CRITERIA_MAX: usize = 50;
/// The most `depends_on` entries of a todo.
pub const DEPENDS_MAX: usize = 100;
/// The most `blocks` entries of a gate.
pub const BLOCKS_MAX: usize = 1_000;
/// The most characters of an agent id (the least is 1).
pub const AGENT_MAX: usize = 64;
/// The most characters of an id a file refers to (`depends_on`, `blocks`, `status_by`).
pub const REF_MAX: usize = 64;
/// The most characters of a hex field (`journal_head`, `signature`).
pub const HEX_MAX: usize = 128;
/// The most evidence entries (`--evidence`, `--artifact`, `--metric` together) in one update.
pub const EVIDENCE_MAX: usize = 100;
/// The most characters of an artifact path.
pub const PATH_MAX: usize = 4_096;
/// The most journal lines `log --limit` shows.
pub const LOG_LIMIT_MAX: usize = 100_000;
/// The longest `LOOPX_LOCK_TIMEOUT`, in seconds (the least is 0).
pub const LOCK_TIMEOUT_MAX_S: u64 = 3_600;
/// The lock timeout when `LOOPX_LOCK_TIMEOUT` is not set, in seconds.
pub const LOCK_TIMEOUT_DEFAULT_S: u64 = 10;
/// The largest owner key file, in bytes.
pub const OWNER_KEY_MAX_BYTES: u64 = 4_096;
/// The most bytes of a watcher's check command (`[check] command`).
pub const CHECK_COMMAND_MAX: usize = 2_048;
/// The longest a check may run before `monitor poll` stops it (`--timeout`), in seconds.
pub const CHECK_TIMEOUT_MAX_S: u64 = 3_600;
/// The most bytes of a check's stdout kept and hashed.
pub const CHECK_OUTPUT_MAX: usize = 64 * 1024;
// todo context
/// The most characters of a todo's `body`.
pub const BODY_MAX: usize = 16_000;
/// The most bytes `--body-file` reads.
pub const BODY_FILE_MAX_BYTES: u64 = 64 * 1024;
/// The most links a todo has.
pub const LINKS_MAX: usize = 20;
/// The most characters of one link.
pub const LINK_MAX: usize = 2_000;
/// The most entries `evidence list` shows (`--limit`).
pub const EVIDENCE_LIST_MAX: usize = 10_000;

/// One step of a key path: a key name or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A key of a table.
    Name(String),
    /// An element of an array (or array of tables).
    Index(usize),
}

/// A value outside its bound: where it is (`quota.window`, `spend[2].cost_usd`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The key path, from the top of the file.
    pub key: Vec<Key>,
    /// What is wrong, naming the bound.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(key: &str, message: impl Into<String>) -> Violation {
        Violation {
            key: key.split('.').map(|k| Key::Name(k.to_string())).collect(),
            message: message.into(),
        }
    }

    /// Puts this violation under `prefix` (a table name, or an index).
    fn under(mut self, prefix: Vec<Key>) -> Violation {
        let mut key = prefix;
        key.append(&mut self.key);
        self.key = key;
        self
    }

    /// The key path as people read it: `spend[2].cost_usd`.
    pub fn path(&self) -> String {
        let mut s = String::new();
        for k in &self.key {
            match k {
                Key::Name(n) if s.is_empty() => s.push_str(n),
                Key::Name(n) => {
                    s.push('.');
                    s.push_str(n);
                }
                Key::Index(i) => s.push_str(&format!("[{i}]")),
            }
        }
        s
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The result of a bounds check.
pub type Checked = std::result::Result<(), Violation>;

/// A state value whose bounds can be checked.
pub trait Bounded {
    /// The first value outside its bound, if any.
    fn check_bounds(&self) -> Checked;
}

impl Bounded for Config {
    fn check_bounds(&self) -> Checked {
        check_config(self)
    }
}

impl Bounded for Todo {
    fn check_bounds(&self) -> Checked {
        check_todo(self)
    }
}

impl Bounded for Gate {
    fn check_bounds(&self) -> Checked {
        check_gate(self)
    }
}

impl Bounded for crate::kernel::model::AgentInfo {
    fn check_bounds(&self) -> Checked {
        agent("id", &self.id)?;
        caps("capabilities", &self.capabilities)
    }
}

/// At most 32 capabilities, each 1 to 64 of `[a-z0-9_.-]`.
fn caps(key: &str, c: &[String]) -> Checked {
    if crate::kernel::agents::caps_in_bounds(c) {
        return Ok(());
    }
    Err(Violation::new(
        key,
        format!(
            "`{key}` must be at most {} names of 1 to {} of a-z 0-9 _ . -",
            crate::kernel::agents::CAPS_MAX,
            crate::kernel::agents::CAP_LEN_MAX
        ),
    ))
}

/// A todo's routing fields: `requires`, `reviews`, `exclude_agents`.
fn check_routing(t: &Todo) -> Checked {
    caps("requires", &t.requires)?;
    opt_text("reviews", &t.reviews, REF_MAX)?;
    count(
        "exclude_agents",
        t.exclude_agents.len(),
        crate::kernel::agents::EXCLUDE_MAX,
    )?;
    each("exclude_agents", &t.exclude_agents, |a| {
        agent("exclude_agents", a)
    })
}

/// `[agents.ID]`: capabilities in bounds, slots 1 to 100,000.
fn check_agents(c: &Config) -> Checked {
    for (id, p) in &c.agents {
        let key = format!("agents.{id}");
        if let Some(cs) = &p.capabilities {
            caps(&format!("{key}.capabilities"), cs)?;
        }
        if let Some(s) = p.slots {
            int(
                &format!("{key}.slots"),
                u64::from(s),
                u64::from(SLOTS_MIN),
                u64::from(SLOTS_MAX),
            )?;
        }
    }
    Ok(())
}

impl Bounded for QuotaFile {
    fn check_bounds(&self) -> Checked {
        check_quota(self)
    }
}

/// A bounds check as a usage error (exit 2): for values that come from a command.
pub fn usage(r: Checked) -> Result<()> {
    r.map_err(|v| Error::usage(v.message).hint("see the Bounds table in docs/state-format.md"))
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// A text of at most `max` characters.
pub fn text(key: &str, s: &str, max: usize) -> Checked {
    let n = chars(s);
    if n > max {
        return Err(Violation::new(
            key,
            format!("`{key}` is {n} characters long; the most is {max}"),
        ));
    }
    Ok(())
}

/// A text of 1 to `max` characters, not only spaces.
pub fn required_text(key: &str, s: &str, max: usize) -> Checked {
    if s.trim().is_empty() {
        return Err(Violation::new(key, format!("`{key}` cannot be empty")));
    }
    text(key, s, max)
}

fn opt_text(key: &str, s: &Option<String>, max: usize) -> Checked {
    s.as_deref().map_or(Ok(()), |s| text(key, s, max))
}

/// An agent id as a file holds it: 1 to 64 characters.
pub fn agent(key: &str, s: &str) -> Checked {
    if s.is_empty() || chars(s) > AGENT_MAX {
        return Err(Violation::new(
            key,
            format!("`{key}` must be an agent id of 1 to {AGENT_MAX} characters"),
        ));
    }
    Ok(())
}

/// A number of entries of at most `max`.
pub fn count(key: &str, n: usize, max: usize) -> Checked {
    if n > max {
        return Err(Violation::new(
            key,
            format!("`{key}` has {n} entries; the most is {max}"),
        ));
    }
    Ok(())
}

/// A duration in `min..=max`.
pub fn duration(key: &str, d: Dur, min: Dur, max: Dur) -> Checked {
    if d < min || d > max {
        return Err(Violation::new(
            key,
            format!("`{key}` must be {min} to {max}, not {d}"),
        ));
    }
    Ok(())
}

/// An integer in `min..=max`.
pub fn int(key: &str, n: u64, min: u64, max: u64) -> Checked {
    if n < min || n > max {
        return Err(Violation::new(
            key,
            format!("`{key}` must be {min} to {max}, not {n}"),
        ));
    }
    Ok(())
}

/// A cost in US dollars: a finite number from 0 to `COST_USD_MAX`.
pub fn cost_usd(key: &str, c: f64) -> Checked {
    if !c.is_finite() || !(0.0..=COST_USD_MAX).contains(&c) {
        return Err(Violation::new(
            key,
            format!("`{key}` must be a number from 0 to {COST_USD_MAX}, not {c}"),
        ));
    }
    Ok(())
}

fn each<T>(key: &str, items: &[T], check: impl Fn(&T) -> Checked) -> Checked {
    for (i, item) in items.iter().enumerate() {
        check(item).map_err(|v| {
            let mut v = v;
            v.key = vec![Key::Name(key.to_string()), Key::Index(i)];
            v
        })?;
    }
    Ok(())
}

fn refs(key: &str, ids: &[String], max: usize) -> Checked {
    count(key, ids.len(), max)?;
    each(key, ids, |id| required_text(key, id, REF_MAX))
}

/// `loopx.toml`: goal texts, quota policy and lease default.
pub fn check_config(c: &Config) -> Checked {
    let g = &c.goal;
    required_text("goal.id", &g.id, TITLE_MAX)?;
    required_text("goal.objective", &g.objective, TEXT_MAX)?;
    count(
        "goal.success_criteria",
        g.success_criteria.len(),
        CRITERIA_MAX,
    )?;
    each("success_criteria", &g.success_criteria, |s| {
        text("goal.success_criteria", s, TITLE_MAX)
    })
    .map_err(|v| v.under(vec![Key::Name("goal".into())]))?;
    opt_text("goal.reason", &g.reason, TEXT_MAX)?;
    let q = &c.quota;
    int(
        "quota.slots",
        u64::from(q.slots),
        u64::from(SLOTS_MIN),
        u64::from(SLOTS_MAX),
    )?;
    duration("quota.window", q.window, WINDOW_MIN, WINDOW_MAX)?;
    duration("quota.min_interval", q.min_interval, Dur(0), q.window)?;
    if let Some(t) = q.tokens {
        int("quota.tokens", t, 1, TOKENS_MAX)?;
    }
    if let Some(c) = q.cost_usd {
        cost_usd("quota.cost_usd", c)?;
        if c < COST_BUDGET_MIN {
            return Err(Violation::new(
                "quota.cost_usd",
                "`quota.cost_usd` must be at least 0.000001 (remove the key for no cost budget)",
            ));
        }
    }
    crate::kernel::alert::check_hooks(&c.hooks)?;
    if let Some(d) = &c.done.check {
        check_command("done.check", d)?;
    }
    if let Some(n) = c.breaker.turns {
        let max = u64::from(crate::kernel::model::TURNS_MAX);
        int("breaker.turns", u64::from(n), 0, max)?;
    }
    check_agents(c)?;
    duration("lease.ttl", c.lease.ttl, TTL_MIN, TTL_MAX)
}

fn check_lease(l: &Lease) -> Checked {
    agent("holder", &l.holder)?;
    opt_text("turn", &l.turn, NAME_MAX)?;
    if let Some(f) = &l.handoff_from {
        agent("handoff_from", f)?;
    }
    paths("paths", &l.paths)?;
    opt_text("worktree", &l.worktree, PATH_MAX)?;
    if let Some(b) = &l.base {
        opt_text("base.head", &b.head, HEX_MAX)?;
        opt_text("base.tree", &b.tree, HEX_MAX)?;
    }
    int("fence", l.fence, 0, FENCE_MAX)
}

/// A reservation as a file holds it: the globs `--paths` takes, already normalised.
fn paths(key: &str, v: &[String]) -> Checked {
    match crate::kernel::reserve::normalise(key, v) {
        Ok(n) if n == v => Ok(()),
        Ok(n) => Err(Violation::new(
            key,
            format!(
                "`{key}` is not normalised (a repeat, `.`, a doubled or trailing `/`): write {}",
                serde_json::to_string(&n).unwrap_or_default()
            ),
        )),
        Err(e) => Err(Violation::new(key, e.message)),
    }
}

/// A todo file (`todos/` or `archive/`).
pub fn check_todo(t: &Todo) -> Checked {
    required_text("title", &t.title, TITLE_MAX)?;
    refs("depends_on", &t.depends_on, DEPENDS_MAX)?;
    if let Some(e) = t.every {
        duration("every", e, EVERY_MIN, EVERY_MAX)?;
    }
    agent("created_by", &t.created_by)?;
    opt_text("reason", &t.reason, TEXT_MAX)?;
    opt_text("status_by", &t.status_by, REF_MAX)?;
    int("fence", t.fence, 0, FENCE_MAX)?;
    if let Some(l) = &t.lease {
        check_lease(l).map_err(|v| v.under(vec![Key::Name("lease".into())]))?;
    }
    if let Some(c) = &t.check {
        check_check(c).map_err(|v| v.under(vec![Key::Name("check".into())]))?;
    }
    check_routing(t)?;
    if let Some(s) = &t.stall {
        let max = u64::from(crate::kernel::model::TURNS_MAX);
        int("stall.turns", u64::from(s.turns), 0, max)?;
        int("stall.failures", u64::from(s.failures), 0, max)?;
        opt_text("stall.parked", &s.parked, REF_MAX)?;
    }
    paths("paths", &t.paths)?;
    opt_text("body", &t.body, BODY_MAX)?;
    count("links", t.links.len(), LINKS_MAX)?;
    each("links", &t.links, |l| link("links", l))?;
    Ok(())
}

/// A link: `scheme://rest`, a scheme of letters, digits, `+`, `-` or `.`, at most `LINK_MAX`
/// characters, no white space or control character.
pub fn link(key: &str, s: &str) -> Checked {
    text(key, s, LINK_MAX)?;
    let ok_scheme = |sc: &str| {
        sc.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && sc
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    };
    let well_formed = s
        .split_once("://")
        .is_some_and(|(sc, rest)| ok_scheme(sc) && !rest.is_empty());
    if !well_formed
        || s.chars()
            .any(|c| c.is_whitespace() || crate::text::is_unsafe(c))
    {
        return Err(Violation::new(
            key,
            format!(
                "`{key}` must be a URL like https://host/path, with no spaces or control characters"
            ),
        ));
    }
    Ok(())
}

/// A watcher's `[check]`: a command of 1 to 2,048 bytes without control characters, an agent, a
/// hex hash.
pub fn check_check(c: &Check) -> Checked {
    check_command("command", &c.command)?;
    agent("proposed_by", &c.proposed_by)?;
    if let Some(h) = &c.last_hash
        && (h.len() > HEX_MAX || !h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Violation::new(
            "last_hash",
            format!("`last_hash` must be hex of at most {HEX_MAX} characters"),
        ));
    }
    Ok(())
}

/// A check command: not empty, at most `CHECK_COMMAND_MAX` bytes, no control character (see
/// `crate::text::is_unsafe`).
pub fn check_command(key: &str, s: &str) -> Checked {
    if s.trim().is_empty() {
        return Err(Violation::new(key, format!("`{key}` cannot be empty")));
    }
    if s.len() > CHECK_COMMAND_MAX {
        return Err(Violation::new(
            key,
            format!(
                "`{key}` is {} bytes long; the most is {CHECK_COMMAND_MAX}",
                s.len()
            ),
        ));
    }
    plain_command(key, s)
}

/// A command text the owner approves by reading it: printable ASCII only (U+0020 to U+007E).
/// Anything else can show one way and run another: a newline reads as `\n` while `sh -c` runs
/// a new line; U+2800 or a no-break space reads as a space, but the shell does not split on it,
/// so `x=1<NBSP>#;touch f` runs `touch f`; a Cyrillic `а` reads as a Latin `a`. One rule for
/// checks, hooks and every command text the owner approves (docs/security.md).
pub fn plain_command(key: &str, s: &str) -> Checked {
    let Some((at, c)) = s.char_indices().find(|(_, c)| !matches!(c, ' '..='~')) else {
        return Ok(());
    };
    Err(Violation::new(
        key,
        format!(
            "`{key}` cannot hold U+{:04X} (byte {at}): a command the owner approves is printable ASCII, so the text shown is the text run (write other characters as printf escapes, or approve a script that holds them)",
            c as u32
        ),
    ))
}

/// A gate file.
pub fn check_gate(g: &Gate) -> Checked {
    required_text("question", &g.question, TEXT_MAX)?;
    count("options", g.options.len(), OPTIONS_MAX)?;
    each("options", &g.options, |o| {
        required_text("options", o, NAME_MAX)
    })?;
    refs("blocks", &g.blocks, BLOCKS_MAX)?;
    agent("opened_by", &g.opened_by)?;
    opt_text("decided_by", &g.decided_by, REF_MAX)?;
    opt_text("option", &g.option, NAME_MAX)?;
    opt_text("reason", &g.reason, TEXT_MAX)?;
    opt_text("journal_head", &g.journal_head, HEX_MAX)?;
    opt_text("signature", &g.signature, HEX_MAX)?;
    if let Some(a) = &g.action {
        crate::kernel::gate_action::check(a)?;
    }
    g.used
        .as_ref()
        .map_or(Ok(()), crate::kernel::gate_action::check_use)
}

/// One spend of quota.
pub fn check_spend(s: &Spend) -> Checked {
    agent("agent", &s.agent)?;
    int(
        "slots",
        u64::from(s.slots),
        u64::from(SLOTS_MIN),
        u64::from(SLOTS_MAX),
    )?;
    opt_text("turn", &s.turn, NAME_MAX)?;
    if let Some(t) = s.tokens {
        int("tokens", t, 0, TOKENS_MAX)?;
    }
    if let Some(c) = s.cost_usd {
        cost_usd("cost_usd", c)?;
    }
    Ok(())
}

/// `quota.toml`: how many spends, and each one.
pub fn check_quota(q: &QuotaFile) -> Checked {
    count("spend", q.spends.len(), SPENDS_MAX)?;
    for (i, s) in q.spends.iter().enumerate() {
        check_spend(s).map_err(|v| v.under(vec![Key::Name("spend".into()), Key::Index(i)]))?;
    }
    Ok(())
}

/// One evidence entry about to be written.
pub fn check_evidence(e: &Evidence) -> Checked {
    text("evidence", &e.summary, TEXT_MAX)?;
    opt_text("metric name", &e.name, NAME_MAX)?;
    opt_text("artifact path", &e.path, PATH_MAX)?;
    opt_text("command", &e.command, TEXT_MAX)?;
    opt_text("output", &e.output, TEXT_MAX)?;
    opt_text("turn", &e.turn, NAME_MAX)?;
    count("argv", e.argv.len(), ARGV_MAX)?;
    count(
        "outside",
        e.outside.len(),
        crate::kernel::reserve::OUTSIDE_MAX,
    )?;
    each("outside", &e.outside, |a| text("outside", a, PATH_MAX))?;
    each("argv", &e.argv, |a| text("argv", a, ARG_MAX))
}

#[cfg(test)]
mod tests;
