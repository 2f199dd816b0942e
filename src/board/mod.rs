//! The board: a live terminal control plane over `.loopx/` (the loop, the terminal, and its parts).

pub mod actions;
pub mod alerts;
pub mod app;
pub mod data;
pub mod demo;
pub mod derive;
pub mod edit;
pub mod keymap;
pub mod layout;
pub mod notify;
pub mod panes;
pub mod sealer;
pub mod term;
pub mod theme;
pub mod view;
pub mod watcher;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::Event as TermEvent;

use crate::board::app::{App, AppEvent, Effect, Live};
use crate::board::data::Loader;
use crate::board::theme::Theme;
use crate::board::watcher::{Poller, Signal};
use crate::kernel::seal::BOARD_SEAL_EVERY;
use crate::kernel::{Code, Dur, Error, Result, Ts};
use crate::store::FileStore;

/// How the board is opened.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Changes are off.
    pub readonly: bool,
    /// Poll instead of watching.
    pub poll: bool,
    /// A theme name or file.
    pub theme: Option<String>,
    /// How often at most a board that holds the owner's key seals new journal lines (a minute
    /// when `None`; tests make it shorter).
    pub seal_every: Option<Dur>,
}

/// What arrives on the loop's channel.
#[derive(Debug)]
enum Msg {
    Term(TermEvent),
    Watch(Signal),
}

/// Chooses the theme: `--theme`, else `[board] theme` in loopx.toml, else dark; NO_COLOR turns color off.
pub fn choose_theme(flag: Option<&str>, config_theme: Option<&str>) -> Result<Theme> {
    let theme = match flag.or(config_theme) {
        Some(spec) => Theme::load(spec)
            .map_err(|e| Error::usage(e).hint("built-in themes: dark, light, high-contrast"))?,
        None => Theme::dark(),
    };
    Ok(if theme::no_color_env() {
        theme.without_color()
    } else {
        theme
    })
}

/// Opens the board on a store until the operator quits.
pub fn run(store: FileStore, opts: Options) -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::usage("the board needs a terminal")
            .hint("use `loopx status` for a text summary"));
    }
    let mut loader = Loader::new(store.clone());
    let first = loader.full(Ts::now());
    let cfg_theme = first
        .full
        .as_ref()
        .and_then(|s| s.config.extra.get("board"))
        .and_then(|b| b.get("theme"))
        .and_then(|t| t.as_str())
        .map(str::to_string);
    let theme = choose_theme(opts.theme.as_deref(), cfg_theme.as_deref())?;
    let project = store.root().display().to_string();
    let mut app = App::new(project, theme, opts.readonly, Ts::now());
    app.owner = actions::Owner::detect(&store);
    let mut pending = app.on_event(AppEvent::Loaded(first));

    let mut term = term::Term::enter()
        .map_err(|e| Error::new(Code::Io, format!("cannot set up the terminal: {e}")))?;
    if let Ok(sz) = term.size() {
        app.size = sz;
    }
    let (tx, rx) = mpsc::channel::<Msg>();
    let input_tx = tx.clone();
    std::thread::Builder::new()
        .name("board-input".into())
        .spawn(move || term::read_input(|ev| input_tx.send(Msg::Term(ev)).is_ok()))
        .map_err(|e| Error::new(Code::Io, format!("cannot start the input thread: {e}")))?;

    let dir = store.dir().to_path_buf();
    let mut poller: Option<Poller> = None;
    let mut _watch = None;
    if opts.poll {
        poller = Some(Poller::new(&dir));
        app.on_event(AppEvent::Live(Live::Polling("--poll".into())));
    } else if let Some(fs) = crate::store::lock::network_fs(&dir) {
        poller = Some(Poller::new(&dir));
        app.on_event(AppEvent::Live(Live::Polling(format!(
            "{fs}: no events there"
        ))));
    } else {
        match watcher::watch_channel(&dir, tx.clone(), Msg::Watch) {
            Ok(w) => _watch = Some(w),
            Err(e) => {
                poller = Some(Poller::new(&dir));
                app.on_event(AppEvent::Live(Live::Polling(format!("watch failed: {e}"))));
            }
        }
    }

    let mut sealer = sealer::Sealer::new(opts.seal_every.unwrap_or(BOARD_SEAL_EVERY));
    let tick = Duration::from_secs(1);
    let mut next_tick = Instant::now() + tick;
    let mut journal_seen = watcher::journal_stamp(&dir);
    let mut unseen_since: Option<Instant> = None;
    let mut last_event = Instant::now();
    let mut dirty = true;
    let result: Result<()> = loop {
        // Effects first: they may produce more events.
        while let Some(fx) = pending.pop() {
            match fx {
                Effect::Quit => app.quit = true,
                Effect::Suspend => term.suspend(),
                Effect::Bell => term.bell(),
                Effect::Title(t) => term.title(&t),
                Effect::Copy(text) => term.copy(&text),
                Effect::Edit(file) => {
                    let r = edit::run(&mut term, store.root(), &file);
                    pending.extend(app.on_event(AppEvent::ActionDone(r)));
                    let d = loader.full(Ts::now());
                    pending.extend(app.on_event(AppEvent::Loaded(d)));
                }
                Effect::Reload => {
                    let d = loader.full(Ts::now());
                    pending.extend(app.on_event(AppEvent::Loaded(d)));
                }
                Effect::LoadEvidence(id) => {
                    let r = loader.evidence(&id);
                    pending.extend(app.on_event(AppEvent::Evidence(id, r)));
                }
                Effect::Perform(a) => {
                    // The key may have been created since the board started.
                    if !app.owner.verified {
                        app.owner = actions::Owner::detect(&store);
                    }
                    let r =
                        actions::perform(&store, &app.owner, &a, Ts::now()).map_err(|e| {
                            match e.hint {
                                Some(h) => format!("{} ({h})", e.message),
                                None => e.message,
                            }
                        });
                    pending.extend(app.on_event(AppEvent::ActionDone(r)));
                }
            }
            dirty = true;
        }
        if app.quit || term::terminated() {
            break Ok(());
        }
        if dirty {
            if let Err(e) = term.draw(&app) {
                break Err(Error::new(Code::Io, format!("cannot draw: {e}")));
            }
            dirty = false;
        }
        let wait = next_tick.saturating_duration_since(Instant::now());
        let msg = match rx.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break Ok(()),
        };
        let mut changed: Vec<PathBuf> = Vec::new();
        let mut rescan = false;
        let mut handle = |m: Msg, app: &mut App, pending: &mut Vec<Effect>| match m {
            Msg::Term(TermEvent::Key(k)) => pending.extend(app.on_event(AppEvent::Key(k))),
            Msg::Term(TermEvent::Mouse(me)) => pending.extend(app.on_event(AppEvent::Mouse(me))),
            Msg::Term(TermEvent::Resize(w, h)) => {
                pending.extend(app.on_event(AppEvent::Resize(w, h)))
            }
            Msg::Term(TermEvent::Paste(text)) => {
                pending.extend(app.on_event(AppEvent::Paste(text)))
            }
            Msg::Term(_) => {}
            Msg::Watch(Signal::Changed(p)) => changed.extend(p),
            Msg::Watch(Signal::Rescan) => rescan = true,
            Msg::Watch(Signal::Failed(e)) => {
                pending.extend(
                    app.on_event(AppEvent::Live(Live::Polling(format!("watch failed: {e}")))),
                );
            }
        };
        if let Some(m) = msg {
            handle(m, &mut app, &mut pending);
            // Fold whatever else is queued into this round.
            while let Ok(m) = rx.try_recv() {
                handle(m, &mut app, &mut pending);
            }
            dirty = true;
        }
        if matches!(app.live, Live::Polling(_)) && poller.is_none() {
            poller = Some(Poller::new(&dir));
            _watch = None;
            rescan = true;
        }
        if Instant::now() >= next_tick {
            next_tick = Instant::now() + tick;
            pending.extend(app.on_event(AppEvent::Tick(Ts::now())));
            sealer.tick(&store, &mut app, Ts::now());
            dirty = true;
            if let Some(p) = poller.as_mut() {
                changed.extend(p.scan());
            } else {
                // No events while the journal grows: events do not arrive here, so poll.
                let stamp = watcher::journal_stamp(&dir);
                if stamp != journal_seen {
                    match unseen_since {
                        None => unseen_since = Some(Instant::now()),
                        Some(t) if last_event < t && t.elapsed() >= Duration::from_millis(1500) => {
                            app.on_event(AppEvent::Live(Live::Polling(
                                "no file events arrive".into(),
                            )));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        if rescan {
            let d = loader.full(Ts::now());
            pending.extend(app.on_event(AppEvent::Loaded(d)));
            changed.clear();
            dirty = true;
        }
        if !changed.is_empty() {
            last_event = Instant::now();
            journal_seen = watcher::journal_stamp(&dir);
            unseen_since = None;
            let d = loader.changed(&changed, Ts::now());
            pending.extend(app.on_event(AppEvent::Loaded(d)));
            dirty = true;
        }
    };
    drop(term);
    result
}
