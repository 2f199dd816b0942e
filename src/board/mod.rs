//! The board: a terminal control plane that follows a project, in `.loopx/` or in a database (the
//! loop, the terminal, and its parts).

pub mod alerts;
pub mod app;
pub mod data;
pub mod demo;
pub mod derive;
pub mod dialogs;
pub mod draw;
pub mod edit;
pub mod keymap;
pub mod layout;
pub mod metrics;
pub mod notify;
pub mod overview;
pub mod pairing;
pub mod panes;
pub mod sealer;
pub mod term;
pub mod theme;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::Event as TermEvent;

use crate::board::app::{App, AppEvent, Effect, Following};
use crate::board::data::Loader;
use crate::board::theme::Theme;
use crate::flows::owner::Owner;
use crate::kernel::seal::BOARD_SEAL_EVERY;
use crate::kernel::{Code, Dur, Error, Result, Ts};
use crate::store::follow::{Feed, Followed, Signal};

/// How the board is opened.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Changes are off.
    pub readonly: bool,
    /// Poll instead of hearing file events.
    pub poll: bool,
    /// A theme name or file.
    pub theme: Option<String>,
    /// How often at most a board that holds the owner's key seals new journal lines (a minute
    /// when `None`; tests make it shorter).
    pub seal_every: Option<Dur>,
}

/// What arrives on a loop's channel: a terminal event, or a change signal of the project at
/// this index (a single board's is 0).
#[derive(Debug)]
pub(crate) enum Msg {
    Term(TermEvent),
    Follow(usize, Signal),
}

/// How a board's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leave {
    /// `q`: the operator is done.
    Quit,
    /// Esc on a board opened from the overview: back to it.
    Back,
}

/// What a board's loop runs on: the terminal, and the loop's channel.
pub(crate) struct Screen<'a> {
    pub(crate) term: &'a mut term::Term,
    pub(crate) rx: &'a mpsc::Receiver<Msg>,
}

/// Where a store's feed sends its signals: the loop's channel, tagged with the project's index.
pub(crate) fn sink(tx: mpsc::Sender<Msg>, i: usize) -> crate::store::follow::Sink {
    Box::new(move |s| tx.send(Msg::Follow(i, s)).is_ok())
}

/// Fails (exit 2) off a terminal.
pub(crate) fn need_terminal() -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::usage("the board needs a terminal")
            .hint("use `loopx status` for a text summary"));
    }
    Ok(())
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

/// Opens the board on a store (the files, or a database) until the operator quits.
pub fn run(store: Box<dyn Followed>, opts: Options) -> Result<()> {
    need_terminal()?;
    let mut loader = Loader::new(store);
    let (mut app, pending) = start(&mut loader, &opts)?;
    let mut term = term::Term::enter()
        .map_err(|e| Error::new(Code::Io, format!("cannot set up the terminal: {e}")))?;
    let (tx, rx) = mpsc::channel::<Msg>();
    read_input(tx.clone())?;
    let (mut feed, polling) = loader.store().follow(opts.poll, sink(tx, 0))?;
    if let Some(why) = polling {
        app.on_event(AppEvent::Following(Following::Polling(why)));
    }
    let mut screen = Screen {
        term: &mut term,
        rx: &rx,
    };
    let r = board_loop(
        &mut screen,
        &mut loader,
        &mut app,
        pending,
        feed.as_mut(),
        &opts,
    );
    drop(term);
    r.map(|_| ())
}

/// The board's loop on one project (its loader, app and feed) until the operator quits or, on a
/// board opened from the overview, goes back; the signals of other projects are handed to
/// `others` as they arrive.
pub(crate) fn board_loop(
    screen: &mut Screen,
    loader: &mut Loader,
    app: &mut App,
    pending: Vec<Effect>,
    feed: &mut dyn Feed,
    opts: &Options,
) -> Result<Leave> {
    board_loop_among(screen, loader, app, pending, feed, opts, 0, &mut |_, _| {})
}

/// [`board_loop`] on project `me` among others.
#[allow(clippy::too_many_arguments)]
pub(crate) fn board_loop_among(
    screen: &mut Screen,
    loader: &mut Loader,
    app: &mut App,
    mut pending: Vec<Effect>,
    feed: &mut dyn Feed,
    opts: &Options,
    me: usize,
    others: &mut dyn FnMut(usize, Signal),
) -> Result<Leave> {
    if let Ok(sz) = screen.term.size() {
        app.size = sz;
    }
    let mut sealer = sealer::Sealer::new(opts.seal_every.unwrap_or(BOARD_SEAL_EVERY));
    let tick = Duration::from_secs(1);
    let mut next_tick = Instant::now() + tick;
    let mut quick = QuickTick::default();
    let mut dirty = true;
    loop {
        // Effects first: they may produce more events.
        while let Some(fx) = pending.pop() {
            perform(fx, app, loader, screen.term, &mut pending);
            dirty = true;
        }
        if app.quit || term::terminated() {
            return Ok(Leave::Quit);
        }
        if app.back {
            return Ok(Leave::Back);
        }
        if dirty {
            screen
                .term
                .draw(app)
                .map_err(|e| Error::new(Code::Io, format!("cannot draw: {e}")))?;
            dirty = false;
        }
        let wait = quick.wait(app, next_tick);
        let Some((mut news, heard)) = receive(screen, wait, (me, app), &mut pending) else {
            return Ok(Leave::Quit);
        };
        dirty |= heard;
        for (i, s) in news.others.drain(..) {
            others(i, s);
        }
        if Instant::now() >= next_tick {
            next_tick = Instant::now() + tick;
            on_tick(app, loader, feed, &mut sealer, &mut news, &mut pending);
            dirty = true;
        } else {
            dirty |= quick.tick(app, &mut pending);
        }
        news.rescan |= matches!(app.following, Following::Polling(_)) && feed.poll_instead();
        if news.rescan || news.changed {
            let d = load(&news, feed, loader);
            pending.extend(app.on_event(AppEvent::Loaded(d)));
            dirty = true;
        }
    }
}

/// The app's quicker clock while it asks for one (the pair dialog waiting for the phone).
#[derive(Debug, Default)]
struct QuickTick {
    next: Option<Instant>,
}

impl QuickTick {
    /// How long to wait for a message: until the second's tick, or sooner for a quick one.
    fn wait(&mut self, app: &App, next_tick: Instant) -> Duration {
        let due = match app.quick_tick() {
            Some(_) => (*self.next.get_or_insert_with(Instant::now)).min(next_tick),
            None => {
                self.next = None;
                next_tick
            }
        };
        due.saturating_duration_since(Instant::now())
    }

    /// A quick tick when one is due: only the app's clock (the seal and the feed keep their
    /// second). True when it ticked.
    fn tick(&mut self, app: &mut App, pending: &mut Vec<Effect>) -> bool {
        match (app.quick_tick(), self.next) {
            (Some(every), Some(at)) if Instant::now() >= at => {
                self.next = Some(Instant::now() + every);
                pending.extend(app.on_event(AppEvent::Tick(Ts::now())));
                true
            }
            _ => false,
        }
    }
}

/// Waits up to `wait` for a message, then takes whatever else is queued in the same round;
/// `None` when every sender is gone. True when something came.
fn receive(
    screen: &mut Screen,
    wait: Duration,
    (me, app): (usize, &mut App),
    pending: &mut Vec<Effect>,
) -> Option<(News, bool)> {
    let mut news = News::default();
    match screen.rx.recv_timeout(wait) {
        Ok(m) => {
            news.handle(m, me, app, pending);
            while let Ok(m) = screen.rx.try_recv() {
                news.handle(m, me, app, pending);
            }
            Some((news, true))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Some((news, false)),
        Err(mpsc::RecvTimeoutError::Disconnected) => None,
    }
}

/// The board's second: the clock, the seal, and a poll.
fn on_tick(
    app: &mut App,
    loader: &Loader,
    feed: &mut dyn Feed,
    sealer: &mut sealer::Sealer,
    news: &mut News,
    pending: &mut Vec<Effect>,
) {
    pending.extend(app.on_event(AppEvent::Tick(Ts::now())));
    // The seal shows hand edits of the files; a database needs none.
    sealer.tick(loader.store(), app, Ts::now());
    let (polled, polling) = feed.tick();
    news.note(polled);
    if let Some(why) = polling {
        app.on_event(AppEvent::Following(Following::Polling(why)));
    }
}

/// Starts the thread that reads the terminal's input into the loop's channel.
fn read_input(tx: mpsc::Sender<Msg>) -> Result<()> {
    std::thread::Builder::new()
        .name("board-input".into())
        .spawn(move || term::read_input(|ev| tx.send(Msg::Term(ev)).is_ok()))
        .map_err(|e| Error::new(Code::Io, format!("cannot start the input thread: {e}")))?;
    Ok(())
}

/// The first load, and the board over it with its theme and owner.
pub(crate) fn start(loader: &mut Loader, opts: &Options) -> Result<(App, Vec<Effect>)> {
    let first = loader.full(Ts::now());
    let cfg_theme = first
        .full
        .as_ref()
        .and_then(|s| s.config.extra.get("board"))
        .and_then(|b| b.get("theme"))
        .and_then(|t| t.as_str())
        .map(str::to_string);
    let theme = choose_theme(opts.theme.as_deref(), cfg_theme.as_deref())?;
    let mut app = App::new(loader.store().name(), theme, opts.readonly, Ts::now());
    app.owner = Owner::detect(loader.store());
    app.pair_dir = crate::flows::device::pairing_dir(
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
    );
    let pending = app.on_event(AppEvent::Loaded(first));
    Ok((app, pending))
}

/// What the round's news asks to read: everything again, or the changed files.
fn load(news: &News, feed: &mut dyn Feed, loader: &mut Loader) -> crate::board::data::Delta {
    if news.rescan {
        loader.full(Ts::now())
    } else {
        feed.saw_changes();
        loader.changed(&news.paths, Ts::now())
    }
}

/// What one round of messages said about the store.
#[derive(Debug, Default)]
struct News {
    /// Something changed (a database says no more).
    changed: bool,
    /// The files that changed.
    paths: Vec<PathBuf>,
    /// Read everything again.
    rescan: bool,
    /// Signals of other projects (a board opened from the overview).
    others: Vec<(usize, Signal)>,
}

impl News {
    /// Changed files found by a poll.
    fn note(&mut self, paths: Vec<PathBuf>) {
        self.changed |= !paths.is_empty();
        self.paths.extend(paths);
    }

    /// Takes one message: a key, a resize, a paste go to the app, a signal is noted.
    fn handle(&mut self, m: Msg, me: usize, app: &mut App, pending: &mut Vec<Effect>) {
        match m {
            Msg::Follow(i, s) if i != me => self.others.push((i, s)),
            Msg::Term(TermEvent::Key(k)) => pending.extend(app.on_event(AppEvent::Key(k))),
            Msg::Term(TermEvent::Mouse(me)) => pending.extend(app.on_event(AppEvent::Mouse(me))),
            Msg::Term(TermEvent::Resize(w, h)) => {
                pending.extend(app.on_event(AppEvent::Resize(w, h)))
            }
            Msg::Term(TermEvent::Paste(text)) => {
                pending.extend(app.on_event(AppEvent::Paste(text)))
            }
            Msg::Term(_) => {}
            Msg::Follow(_, Signal::Changed(p)) => {
                self.changed = true;
                self.paths.extend(p);
            }
            Msg::Follow(_, Signal::Rescan) => self.rescan = true,
            Msg::Follow(_, Signal::Failed(e)) => {
                let f = Following::Polling(format!("watch failed: {e}"));
                pending.extend(app.on_event(AppEvent::Following(f)));
            }
            Msg::Follow(_, Signal::Reconnecting(why)) => {
                pending.extend(app.on_event(AppEvent::Following(Following::Reconnecting(why))));
            }
            Msg::Follow(_, Signal::Reconnected) => {
                pending.extend(app.on_event(AppEvent::Following(Following::Events)));
                self.rescan = true;
            }
        }
    }
}

/// Carries out one effect of the app.
fn perform(
    fx: Effect,
    app: &mut App,
    loader: &mut Loader,
    term: &mut term::Term,
    pending: &mut Vec<Effect>,
) {
    match fx {
        Effect::Quit => app.quit = true,
        Effect::Suspend => term.suspend(),
        Effect::Bell => term.bell(),
        Effect::Title(t) => term.title(&t),
        Effect::Copy(text) => term.copy(&text),
        Effect::Edit(file) => {
            let r = match loader.store().local_root() {
                Some(root) => edit::run(term, root, &file),
                None => Err(format!(
                    "not opening {file}: the project is in a database, not in files"
                )),
            };
            pending.extend(app.on_event(AppEvent::ActDone(r)));
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
            let r = crate::flows::owner::act(loader.store(), &mut app.owner, &a, Ts::now());
            pending.extend(app.on_event(AppEvent::ActDone(r)));
        }
        Effect::Pair(ask) => {
            let dir = app.pair_dir.clone();
            let news = pairing::run(
                loader.store(),
                &mut app.owner,
                dir.as_deref(),
                ask,
                Ts::now(),
            );
            pending.extend(app.on_event(AppEvent::Pair(news)));
        }
    }
}
