//! The board's pair-a-phone dialog (`P`, issue 40) without a terminal: its keys and ticks, the
//! device flows run for its steps on a real project, and snapshots at 80x24 of the QR code, the
//! fingerprint, no `loopx web` running, and a terminal too small for the code.

mod common;

use std::path::{Path, PathBuf};

use common::Project;
use common::frames::text;
use ed25519_dalek::SigningKey;
use loopx::board::app::{App, AppEvent, Effect, Mode, PairAsk, PairNews};
use loopx::board::data::Delta;
use loopx::board::dialogs::pair::Step;
use loopx::board::pairing;
use loopx::board::theme::Theme;
use loopx::flows::device::{Pairing, Started, State};
use loopx::flows::owner::Owner;
use loopx::kernel::authority::to_hex;
use loopx::kernel::device::DeviceKey;
use loopx::kernel::{Code, Config, Error, Snapshot, Ts};
use loopx::runtime::pairing as channel;
use loopx::store::FileStore;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const NOW: &str = "2026-12-02T09:00:00.000Z";

fn now() -> Ts {
    NOW.parse().unwrap()
}

fn config() -> Config {
    toml::from_str(&format!(
        "schema_version = 1\n[goal]\nid = \"g\"\nobjective = \"Ship v1 of wx\"\nstatus = \"active\"\ncreated_at = \"{NOW}\"\nupdated_at = \"{NOW}\"\n"
    ))
    .unwrap()
}

fn owner() -> Owner {
    Owner {
        actor: "owner".into(),
        verified: true,
        note: "owner key SHA256:0f0f0f0f".into(),
    }
}

/// A board on a small project, its owner verified, pairing files in `dir`.
fn board(dir: Option<PathBuf>) -> App {
    let mut a = App::new("/work/wx", Theme::dark(), false, now());
    a.owner = owner();
    a.pair_dir = dir;
    a.on_event(AppEvent::Loaded(Delta {
        at: now(),
        full: Some(Snapshot::new(config())),
        journal: Some(Vec::new()),
        done: Some(Vec::new()),
        ..Delta::default()
    }));
    a
}

fn press(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ch(app: &mut App, c: char) -> Vec<Effect> {
    press(app, KeyCode::Char(c))
}

fn message(app: &App) -> (String, bool) {
    app.message
        .as_ref()
        .map(|m| (m.text.clone(), m.error))
        .unwrap_or_default()
}

fn step(app: &App) -> Step {
    match &app.mode {
        Mode::Pair(p) => p.step.clone(),
        m => panic!("the pair dialog is not open: {m:?}"),
    }
}

/// A pairing as `loopx web` on 127.0.0.1:8080 starts it (a fixed token, so the code is the same
/// each run), ten minutes from now.
fn started() -> Started {
    let token = "5c1e0a7f9d3b48e2a61f0c7d9e4b2a83".to_string();
    Started {
        url: format!("http://127.0.0.1:8080/pair#t={token}"),
        token,
        name: "phone".into(),
        expires_at: Ts(now().0 + 10 * 60_000),
        seen: None,
    }
}

fn phone_key(seed: u8) -> String {
    to_hex(
        SigningKey::from_bytes(&[seed; 32])
            .verifying_key()
            .as_bytes(),
    )
}

/// The pairing once the phone sent its key.
fn submitted(key: &str) -> Pairing {
    Pairing {
        name: "phone".into(),
        project: "/work/wx".into(),
        expires_at: started().expires_at.0,
        state: State::Submitted,
        key: Some(key.into()),
        label: Some("Pixel 8 (Chrome)".into()),
    }
}

fn snap(name: &str, app: &App, w: u16, h: u16) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.bind(|| insta::assert_snapshot!(format!("pair_{name}_{w}x{h}"), text(app, w, h)));
}

#[test]
fn p_opens_the_dialog_and_asks_for_a_url() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    assert_eq!(ch(&mut a, 'P'), vec![Effect::Pair(PairAsk::Start)]);
    assert_eq!(step(&a), Step::Starting);
    // `p` stays pause: the pair key is the capital.
    press(&mut a, KeyCode::Esc);
    assert_eq!(
        a.mode,
        Mode::Normal,
        "Esc closes a dialog with no pairing yet"
    );
    assert!(
        !matches!(ch(&mut a, 'p').first(), Some(Effect::Pair(_))),
        "p is not P"
    );
}

#[test]
fn the_dialog_polls_at_most_every_300_ms_then_asks_about_the_fingerprint() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    ch(&mut a, 'P');
    a.on_event(AppEvent::Pair(PairNews::Started(Ok(started()))));
    assert_eq!(step(&a), Step::Waiting(started()));
    assert!(
        a.quick_tick().is_some(),
        "the loop ticks quickly while waiting"
    );

    let poll = vec![Effect::Pair(PairAsk::Poll(started()))];
    assert_eq!(a.on_event(AppEvent::Tick(now())), poll);
    assert_eq!(a.on_event(AppEvent::Tick(Ts(now().0 + 299))), vec![]);
    assert_eq!(a.on_event(AppEvent::Tick(Ts(now().0 + 300))), poll);

    // y before the phone sent its key does nothing but say so.
    assert_eq!(ch(&mut a, 'y'), vec![]);
    assert_eq!(message(&a).0, "the phone has not sent its key yet");
    assert!(matches!(step(&a), Step::Waiting(_)));

    let key = phone_key(7);
    let waiting = Pairing {
        state: State::Waiting,
        key: None,
        label: None,
        ..submitted(&key)
    };
    a.on_event(AppEvent::Pair(PairNews::Polled(Ok(waiting))));
    assert!(matches!(step(&a), Step::Waiting(_)));
    a.on_event(AppEvent::Pair(PairNews::Polled(Ok(submitted(&key)))));
    let fp = DeviceKey::parse(&key).unwrap().fingerprint();
    let Step::Sent { fingerprint, .. } = step(&a) else {
        panic!("not asking: {:?}", step(&a));
    };
    assert_eq!(fingerprint, fp);
    assert!(a.quick_tick().is_none(), "no more polls once the key came");
    assert_eq!(a.on_event(AppEvent::Tick(Ts(now().0 + 5_000))), vec![]);

    // y enrolls: one answer, and keys are ignored until it is carried out.
    assert_eq!(
        ch(&mut a, 'y'),
        vec![Effect::Pair(PairAsk::Answer(
            Started {
                seen: Some(fp.clone()),
                ..started()
            },
            true
        ))]
    );
    assert_eq!(ch(&mut a, 'y'), vec![]);
    assert_eq!(press(&mut a, KeyCode::Esc), vec![]);
    let denied = Error::new(Code::Denied, "only the owner enrolls a device");
    a.on_event(AppEvent::Pair(PairNews::Answered(Err(denied))));
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(
        message(&a),
        ("not enrolled: only the owner enrolls a device".into(), true),
        "the flow's refusal goes to the status bar"
    );
}

#[test]
fn n_and_esc_decline_and_the_hints_offer_y_only_with_a_fingerprint() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    ch(&mut a, 'P');
    a.on_event(AppEvent::Pair(PairNews::Started(Ok(started()))));
    let hints = |a: &App| -> Vec<&str> { a.scene().hints.iter().map(|h| h.1).collect() };
    assert_eq!(hints(&a), vec!["close"]);
    assert_eq!(
        press(&mut a, KeyCode::Esc),
        vec![Effect::Pair(PairAsk::Answer(started(), false))],
        "Esc while waiting ends the pairing: the URL stops working"
    );
    a.on_event(AppEvent::Pair(PairNews::Answered(Ok(None))));
    assert_eq!(a.mode, Mode::Normal);
    let (line, error) = message(&a);
    assert!(!error && line.starts_with("not enrolled"), "{line}");

    ch(&mut a, 'P');
    a.on_event(AppEvent::Pair(PairNews::Started(Ok(started()))));
    a.on_event(AppEvent::Pair(PairNews::Polled(Ok(submitted(&phone_key(
        3,
    ))))));
    assert_eq!(hints(&a), vec!["enroll", "decline", "close"]);
    assert_eq!(
        ch(&mut a, 'n'),
        vec![Effect::Pair(PairAsk::Answer(
            Started {
                seen: submitted(&phone_key(3)).fingerprint(),
                ..started()
            },
            false
        ))]
    );
}

#[test]
fn p_needs_the_owner_and_a_board_that_changes() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    a.owner = Owner::unverified();
    assert_eq!(ch(&mut a, 'P'), vec![]);
    assert_eq!(a.mode, Mode::Normal);
    assert!(
        message(&a).0.starts_with("only the owner can do this"),
        "{:?}",
        message(&a)
    );

    let mut r = App::new("/work/wx", Theme::dark(), true, now());
    r.owner = owner();
    assert_eq!(ch(&mut r, 'P'), vec![]);
    assert!(message(&r).0.contains("read-only"), "{:?}", message(&r));
}

#[test]
fn the_help_and_the_hints_name_p() {
    let mut a = board(None);
    let hints = a.scene().hints;
    assert!(
        hints
            .iter()
            .any(|(k, h, on)| k == "P" && *h == "pair" && *on),
        "{hints:?}"
    );
    ch(&mut a, '?');
    let help = text(&a, 100, 160);
    assert!(help.contains("pair a phone for loopx web"), "{help}");
    for line in [
        "Pair a phone",
        "enroll the phone's key",
        "decline the phone's key",
    ] {
        assert!(help.contains(line), "{line}: {help}");
    }
}

#[test]
fn a_key_not_answered_before_the_url_expires_is_not_asked_about() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    ch(&mut a, 'P');
    a.on_event(AppEvent::Pair(PairNews::Started(Ok(started()))));
    a.on_event(AppEvent::Pair(PairNews::Polled(Ok(submitted(&phone_key(
        5,
    ))))));
    a.on_event(AppEvent::Tick(started().expires_at));
    assert!(
        matches!(step(&a), Step::Sent { .. }),
        "not before it expires"
    );
    a.on_event(AppEvent::Tick(Ts(started().expires_at.0 + 1)));
    assert_eq!(
        step(&a),
        Step::Failed("the pairing URL expired: press P to start again".into())
    );
    assert_eq!(ch(&mut a, 'y'), vec![], "y enrolls nothing");
    press(&mut a, KeyCode::Esc);
    assert_eq!(a.mode, Mode::Normal);
}

#[test]
fn a_pairing_that_starts_after_its_dialog_closed_is_ended() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    ch(&mut a, 'P');
    press(&mut a, KeyCode::Esc);
    assert_eq!(
        a.on_event(AppEvent::Pair(PairNews::Started(Ok(started())))),
        vec![Effect::Pair(PairAsk::Answer(started(), false))]
    );
}

// ---------------------------------------------------------------- the flows, on a real project

/// Runs the effects a key or tick asked for through the board's pairing steps, as its loop does.
fn run(app: &mut App, p: &Project, fx: Vec<Effect>) {
    let store = FileStore::at(p.root());
    let mut todo = fx;
    while let Some(f) = todo.pop() {
        let Effect::Pair(ask) = f else { continue };
        let dir = app.pair_dir.clone();
        let news = pairing::run(&store, &mut app.owner, dir.as_deref(), ask, Ts::now());
        todo.extend(app.on_event(AppEvent::Pair(news)));
    }
}

#[test]
fn the_flows_pair_a_phone_the_owner_key_decides_and_esc_ends_it() {
    let p = Project::new("board-pair");
    let dir = p.home.path.join("state");
    channel::announce(&dir, "http://127.0.0.1:8080").unwrap();
    let mut a = board(Some(dir.clone()));
    a.now = Ts::now();
    let fx = ch(&mut a, 'P');
    run(&mut a, &p, fx);
    let Step::Waiting(s) = step(&a) else {
        panic!("no URL: {:?}", step(&a));
    };
    assert!(
        s.url.starts_with("http://127.0.0.1:8080/pair#t="),
        "{}",
        s.url
    );
    assert!(text(&a, 80, 24).contains(&s.url), "the URL is on screen");

    let key = phone_key(9);
    channel::submit(&dir, &s.token, &key, Some("Pixel"), Ts::now()).unwrap();
    let fx = a.on_event(AppEvent::Tick(Ts::now()));
    run(&mut a, &p, fx);
    let fp = DeviceKey::parse(&key).unwrap().fingerprint();
    assert!(matches!(step(&a), Step::Sent { ref fingerprint, .. } if *fingerprint == fp));

    // This process does not hold the project's owner key: the store refuses, exit 7's error.
    let fx = ch(&mut a, 'y');
    run(&mut a, &p, fx);
    let (line, error) = message(&a);
    assert!(error && line.starts_with("not enrolled:"), "{line}");
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(
        channel::status(&dir, &s.token, Ts::now()).unwrap().state,
        State::Declined,
        "a refused enrollment ends the pairing"
    );
    assert_eq!(
        p.ok(&["owner", "devices"])["devices"],
        serde_json::json!([])
    );

    let fx = ch(&mut a, 'P');
    run(&mut a, &p, fx);
    let Step::Waiting(s2) = step(&a) else {
        panic!("no URL: {:?}", step(&a));
    };
    assert_ne!(s2.token, s.token, "a new URL each time");
    assert_eq!(ch(&mut a, 'n'), vec![], "n declines a key: none came yet");
    let fx = press(&mut a, KeyCode::Esc);
    run(&mut a, &p, fx);
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(
        channel::status(&dir, &s2.token, Ts::now()).unwrap().state,
        State::Declined
    );
}

// ---------------------------------------------------------------- snapshots

#[test]
fn snapshot_waiting_with_the_qr_code() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    ch(&mut a, 'P');
    a.on_event(AppEvent::Pair(PairNews::Started(Ok(started()))));
    a.on_event(AppEvent::Tick(Ts(now().0 + 2_000)));
    snap("waiting", &a, 80, 24);
}

#[test]
fn snapshot_the_fingerprint_to_compare() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    ch(&mut a, 'P');
    a.on_event(AppEvent::Pair(PairNews::Started(Ok(started()))));
    a.on_event(AppEvent::Pair(PairNews::Polled(Ok(submitted(&phone_key(
        7,
    ))))));
    snap("fingerprint", &a, 80, 24);
}

#[test]
fn snapshot_no_loopx_web_running() {
    let p = Project::new("board-pair-none");
    let mut a = board(Some(p.home.path.join("state")));
    let fx = ch(&mut a, 'P');
    run(&mut a, &p, fx);
    assert!(matches!(step(&a), Step::Failed(_)), "{:?}", step(&a));
    snap("no_server", &a, 80, 24);
}

#[test]
fn snapshot_a_terminal_too_small_for_the_code() {
    let mut a = board(Some(PathBuf::from("/nonexistent/state")));
    ch(&mut a, 'P');
    a.on_event(AppEvent::Pair(PairNews::Started(Ok(started()))));
    snap("too_small", &a, 80, 20);
}
