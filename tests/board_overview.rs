//! The overview of every project (`board --all`) without a terminal: the rows' summaries and
//! order, keys that decide a gate through the board's `OwnerAct`, and insta snapshots of whole
//! screens at 80x24 and 120x40 (fixed clock, fixed data).

use std::path::Path;

use loopx::board::overview::render;
use loopx::board::overview::state::{Effect, Focus, Mode, Overview, Row};
use loopx::board::overview::summary::{self, State};
use loopx::board::theme::Theme;
use loopx::flows::owner::{Owner, OwnerAct};
use loopx::kernel::{Gate, GoalStatus, QuotaFile, Snapshot, Todo, Ts};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const NOW: &str = "2026-11-30T12:00:00.000Z";

fn now() -> Ts {
    NOW.parse().unwrap()
}

fn at(mins: i64) -> String {
    Ts(now().0 + mins * 60_000).to_string()
}

/// A project: its objective, pending gates (question, options), leases (minutes left; negative:
/// lapsed), monitors overdue, slots spent.
fn project(
    objective: &str,
    gates: &[(&str, &[&str])],
    leases: &[i64],
    overdue: usize,
    spent: u32,
) -> Snapshot {
    let config: loopx::kernel::Config = toml::from_str(&format!(
        "schema_version = 1\n[goal]\nid = \"goal-1\"\nobjective = \"{objective}\"\nstatus = \"active\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n[quota]\nslots = 20\nwindow = \"1h\"\n",
        at(-600)
    ))
    .unwrap();
    let mut todos: Vec<Todo> = Vec::new();
    for (i, left) in leases.iter().enumerate() {
        todos.push(toml::from_str(&format!(
            "id = \"t-lease{i}\"\ntitle = \"Leased {i}\"\nstatus = \"open\"\ncreated_by = \"owner\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\nfence = 1\n[lease]\nholder = \"agent-{i}\"\nfence = 1\nacquired_at = \"{0}\"\nexpires_at = \"{1}\"\n",
            at(-60),
            at(*left)
        )).unwrap());
    }
    for i in 0..overdue {
        todos.push(toml::from_str(&format!(
            "id = \"t-mon{i}\"\ntitle = \"Watch {i}\"\nstatus = \"open\"\ncreated_by = \"owner\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\nevery = \"10m\"\n",
            at(-120)
        )).unwrap());
    }
    let gates: Vec<Gate> = gates
        .iter()
        .enumerate()
        .map(|(i, (q, opts))| {
            let mut g: Gate = toml::from_str(&format!(
                "id = \"g-gate{i}{}\"\nquestion = \"{q}\"\noptions = {opts:?}\nopened_by = \"agent-x\"\nopened_at = \"{}\"\nstatus = \"pending\"\n",
                objective.len() % 10,
                at(-30 + i as i64)
            ))
            .unwrap();
            g.signed = true;
            g
        })
        .collect();
    let mut quota = QuotaFile::default();
    let spends: String = (0..spent)
        .map(|k| {
            format!(
                "[[spend]]\nat = \"{}\"\nagent = \"agent-0\"\nslots = 1\n",
                at(-(k as i64) - 1)
            )
        })
        .collect();
    if spent > 0 {
        quota = toml::from_str(&format!("schema_version = 1\n{spends}")).unwrap();
    }
    let mut snap = Snapshot::new(config);
    snap.todos = todos.into_iter().map(|t| (t.id.clone(), t)).collect();
    snap.gates = gates.into_iter().map(|g| (g.id.clone(), g)).collect();
    snap.quota = quota;
    snap
}

fn owner() -> Owner {
    Owner {
        actor: "owner".into(),
        verified: true,
        note: "owner ✓ SHA256:0123456789abcdef".into(),
    }
}

/// Three projects and a bad entry: wx (busy, no gate), api (a gate with options), docs (an
/// overdue monitor, spent quota), gone (cannot be opened).
fn overview() -> Overview {
    let rows = ["wx", "api", "docs", "gone"]
        .iter()
        .map(|n| {
            let mut r = Row::new(*n, format!("/work/{n}"));
            r.owner = owner();
            r
        })
        .collect();
    let mut o = Overview::new(rows, Theme::dark(), false, now());
    o.loaded(
        0,
        Ok(project(
            "Ship v1 of wx, a weather CLI",
            &[],
            &[20, 5, -2],
            0,
            3,
        )),
    );
    o.loaded(
        1,
        Ok(project(
            "Stable API for partners",
            &[("Ship the API v2?", &["yes", "no"])],
            &[10],
            0,
            0,
        )),
    );
    o.loaded(2, Ok(project("Docs site, always fresh", &[], &[], 1, 20)));
    o.loaded(3, Err("/work/gone is not a directory".into()));
    o
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

fn screen(o: &Overview, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| render::draw(f, o)).unwrap();
    t
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
}

macro_rules! snap {
    ($name:expr, $value:expr) => {
        settings().bind(|| insta::assert_snapshot!($name, $value.backend()))
    };
}

#[test]
fn summaries_count_by_the_kernels_rules() {
    let s = summary::summarize(&project("x", &[("q?", &[])], &[20, -2], 2, 7), now());
    assert_eq!(
        (s.gates.len(), s.leases, s.expired, s.overdue),
        (1, 1, 1, 2)
    );
    assert_eq!(
        (s.used, s.limit, s.throttled, s.goal),
        (7, 20, false, GoalStatus::Active)
    );
    let full = summary::summarize(&project("x", &[], &[], 0, 20), now());
    assert!(full.throttled);
    // Twenty-one minutes on, the live lease lapsed too.
    let later = summary::summarize(&project("x", &[], &[20], 0, 0), Ts(now().0 + 21 * 60_000));
    assert_eq!((later.leases, later.expired), (0, 1));
}

#[test]
fn rows_sort_by_what_needs_the_owner() {
    let o = overview();
    let names: Vec<&str> = o.order.iter().map(|&i| o.rows[i].name.as_str()).collect();
    assert_eq!(names, ["api", "docs", "gone", "wx"]);
    assert_eq!(o.rows[o.sel].name, "api", "the first row is selected");
    assert!(matches!(o.rows[3].state, State::Failed(_)));
}

#[test]
fn a_gate_is_approved_with_an_option_through_the_boards_action() {
    let mut o = overview();
    assert!(o.on_key(ch('N')).is_empty());
    assert_eq!(o.focus, Focus::Gates);
    o.on_key(ch('a'));
    assert!(matches!(o.mode, Mode::Confirm { .. }));
    o.on_key(key(KeyCode::Right));
    let fx = o.on_key(ch('y'));
    let Effect::Perform(row, OwnerAct::Approve { gate, option, .. }) = &fx[0] else {
        panic!("{fx:?}");
    };
    assert_eq!(
        (o.rows[*row].name.as_str(), option.as_deref()),
        ("api", Some("no"))
    );
    assert!(gate.starts_with("g-gate0"));
    // Decided here: no longer listed while the load that shows it is on its way.
    assert_eq!(o.pending(), 0);
    o.done(*row, Some(gate), Err("denied".into()));
    assert_eq!(o.pending(), 1, "a refused decision is pending again");
}

#[test]
fn a_rejection_needs_a_reason_and_readonly_or_no_key_refuses() {
    let mut o = overview();
    o.on_key(ch('x'));
    assert!(matches!(o.mode, Mode::Reason { .. }));
    o.on_key(key(KeyCode::Enter));
    assert!(o.message.as_ref().unwrap().error);
    for c in "not yet".chars() {
        o.on_key(ch(c));
    }
    o.on_key(key(KeyCode::Enter));
    let fx = o.on_key(ch('y'));
    assert!(
        matches!(&fx[0], Effect::Perform(_, OwnerAct::Reject { reason, .. }) if reason == "not yet"),
        "{fx:?}"
    );

    let mut ro = overview();
    ro.readonly = true;
    ro.on_key(ch('a'));
    assert_eq!(ro.mode, Mode::Normal);
    let mut nokey = overview();
    nokey.rows[1].owner = Owner::unverified();
    nokey.on_key(ch('a'));
    assert_eq!(nokey.mode, Mode::Normal);
    assert!(nokey.message.unwrap().text.contains("only the owner"));
}

#[test]
fn enter_opens_a_loaded_project_and_q_quits() {
    let mut o = overview();
    assert_eq!(o.on_key(key(KeyCode::Enter)), vec![Effect::Open(1)]);
    o.on_key(key(KeyCode::End));
    assert_eq!(o.rows[o.sel].name, "wx");
    o.on_key(key(KeyCode::Up));
    assert_eq!(o.rows[o.sel].name, "gone");
    assert!(
        o.on_key(key(KeyCode::Enter)).is_empty(),
        "a bad entry does not open"
    );
    assert_eq!(o.on_key(ch('q')), vec![Effect::Quit]);
}

#[test]
fn screens_overview() {
    let o = overview();
    snap!("overview_80x24", screen(&o, 80, 24));
    snap!("overview_120x40", screen(&o, 120, 40));
    let mut c = overview();
    c.on_key(ch('a'));
    snap!("overview_confirm_80x24", screen(&c, 80, 24));
    snap!("overview_confirm_120x40", screen(&c, 120, 40));
    let empty = Overview::new(Vec::new(), Theme::dark(), false, now());
    snap!("overview_empty_80x24", screen(&empty, 80, 24));
}
