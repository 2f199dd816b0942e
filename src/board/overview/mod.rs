//! `loopx board --all`: one screen over every project of the owner's list (`projects.toml`),
//! live. Each project keeps its own store, loader and feed of changes; a signal reloads only the
//! project it came from. Enter opens that project's board in the same terminal (Esc comes back);
//! a gate decided here goes through `flows::owner::perform`, as on the board.

pub mod render;
pub mod state;
pub mod summary;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::Event as TermEvent;

use self::state::{Effect, Overview, Row};
use crate::board::app::Live;
use crate::board::data::{Delta, Loader};
use crate::board::{Leave, Msg, Options, Screen, term};
use crate::flows::owner::{self as actions, Owner};
use crate::kernel::{Code, Error, Result, Snapshot, Ts};
use crate::store::Env;
use crate::store::live::{Feed, Signal, Watched};
use crate::store::open::{self, Choice};
use crate::store::projects::{Entry, Place};

/// Opens an entry's store: a project root's (its files, or the database its `loopx.toml`
/// names), or a database.
pub fn open_entry(e: &Entry, env: &Env, cwd: &Path) -> Result<Box<dyn Watched>> {
    match e.place().map_err(Error::usage)? {
        Place::Files(p) => {
            if !p.is_dir() {
                return Err(Error::new(
                    Code::NotFound,
                    format!("{} is not a directory", p.display()),
                ));
            }
            match open::choose(None, Some(p), cwd, env.clone())? {
                Choice::Files(fs) => Ok(Box::new(fs)),
                Choice::Url(u) => open::connect(&u, env.clone()),
            }
        }
        Place::Database(u) => open::connect(u, env.clone()),
    }
}

/// What a load says of the project: its new state, why it failed, or nothing new.
fn outcome(d: Delta) -> Option<std::result::Result<Snapshot, String>> {
    match (d.full, d.problems.first()) {
        (Some(s), _) => Some(Ok(s)),
        (None, Some(p)) => Some(Err(format!("{}: {}", p.at(), p.message))),
        (None, None) => None,
    }
}

/// One project as the overview runs it.
struct Slot {
    entry: Entry,
    loader: Option<Loader>,
    feed: Option<Box<dyn Feed>>,
    /// Changes heard since the last read: the paths, or everything.
    paths: Vec<PathBuf>,
    changed: bool,
    rescan: bool,
}

/// What the overview's loop needs besides its state.
struct Run<'a> {
    env: &'a Env,
    cwd: &'a Path,
    opts: &'a Options,
    tx: mpsc::Sender<Msg>,
    slots: Vec<Slot>,
}

/// Opens the overview of these projects until the operator quits.
pub fn run(entries: Vec<Entry>, env: &Env, cwd: &Path, opts: Options) -> Result<()> {
    crate::board::need_terminal()?;
    let theme = crate::board::choose_theme(opts.theme.as_deref(), None)?;
    let rows = entries
        .iter()
        .map(|e| Row::new(e.name.clone(), e.shown()))
        .collect();
    let mut o = Overview::new(rows, theme, opts.readonly, Ts::now());
    let (tx, rx) = mpsc::channel::<Msg>();
    let mut run = Run {
        env,
        cwd,
        opts: &opts,
        tx: tx.clone(),
        slots: Vec::new(),
    };
    for e in entries {
        run.slots.push(Slot {
            entry: e,
            loader: None,
            feed: None,
            paths: Vec::new(),
            changed: false,
            rescan: false,
        });
    }
    for i in 0..run.slots.len() {
        run.open(i, &mut o);
    }
    let mut term = term::Term::enter()
        .map_err(|e| Error::new(Code::Io, format!("cannot set up the terminal: {e}")))?;
    std::thread::Builder::new()
        .name("board-input".into())
        .spawn(move || term::read_input(|ev| tx.send(Msg::Term(ev)).is_ok()))
        .map_err(|e| Error::new(Code::Io, format!("cannot start the input thread: {e}")))?;
    let r = run.main(&mut term, &rx, &mut o);
    drop(term);
    r
}

impl Run<'_> {
    /// Opens project `i`'s store, starts its feed and reads it; a project that cannot be
    /// opened is a row with the problem.
    fn open(&mut self, i: usize, o: &mut Overview) {
        let slot = &mut self.slots[i];
        let store = match open_entry(&slot.entry, self.env, self.cwd) {
            Ok(s) => s,
            Err(e) => return o.loaded(i, Err(actions::line_of(e))),
        };
        let mut loader = Loader::new(store);
        o.rows[i].owner = Owner::detect(loader.store());
        let sink = crate::board::sink(self.tx.clone(), i);
        slot.feed = match loader.store().watch(self.opts.poll, sink) {
            Ok((f, why)) => {
                o.rows[i].live = why.map_or(Live::Watching, Live::Polling);
                Some(f)
            }
            Err(e) => {
                o.rows[i].live = Live::Polling(format!("no feed: {}", e.message));
                None
            }
        };
        if let Some(r) = outcome(loader.full(Ts::now())) {
            o.loaded(i, r);
        }
        slot.loader = Some(loader);
    }

    /// The loop: keys, signals and the clock, until the operator quits.
    fn main(
        &mut self,
        t: &mut term::Term,
        rx: &mpsc::Receiver<Msg>,
        o: &mut Overview,
    ) -> Result<()> {
        let tick = Duration::from_secs(1);
        let mut next_tick = Instant::now() + tick;
        let mut dirty = true;
        loop {
            if o.quit || term::terminated() {
                return Ok(());
            }
            if dirty {
                t.draw_overview(o)
                    .map_err(|e| Error::new(Code::Io, format!("cannot draw: {e}")))?;
                dirty = false;
            }
            let wait = next_tick.saturating_duration_since(Instant::now());
            let mut fx = Vec::new();
            match rx.recv_timeout(wait) {
                Ok(m) => {
                    self.take(m, o, &mut fx);
                    while let Ok(m) = rx.try_recv() {
                        self.take(m, o, &mut fx);
                    }
                    dirty = true;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
            for f in fx {
                self.effect(f, t, rx, o)?;
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + tick;
                o.tick(Ts::now());
                self.poll(o);
                dirty = true;
            }
            dirty |= self.reload(o);
        }
    }

    /// Takes one message: a key to the state, a signal noted on its project.
    fn take(&mut self, m: Msg, o: &mut Overview, fx: &mut Vec<Effect>) {
        match m {
            Msg::Term(TermEvent::Key(k)) => fx.extend(o.on_key(k)),
            Msg::Term(_) => {}
            Msg::Watch(i, s) => self.signal(i, s, o),
        }
    }

    fn signal(&mut self, i: usize, s: Signal, o: &mut Overview) {
        let (Some(slot), Some(row)) = (self.slots.get_mut(i), o.rows.get_mut(i)) else {
            return;
        };
        match s {
            Signal::Changed(p) => {
                slot.changed = true;
                slot.paths.extend(p);
            }
            Signal::Rescan => slot.rescan = true,
            Signal::Failed(e) => {
                row.live = Live::Polling(format!("watch failed: {e}"));
                slot.rescan = true;
            }
            Signal::Reconnecting(why) => row.live = Live::Reconnecting(why),
            Signal::Reconnected => {
                row.live = Live::Watching;
                slot.rescan = true;
            }
        }
    }

    /// The second's poll of every feed.
    fn poll(&mut self, o: &mut Overview) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(feed) = slot.feed.as_mut() else {
                continue;
            };
            let (paths, polling) = feed.tick();
            slot.changed |= !paths.is_empty();
            slot.paths.extend(paths);
            if let Some(why) = polling {
                o.rows[i].live = Live::Polling(why);
            }
            slot.rescan |= matches!(o.rows[i].live, Live::Polling(_)) && feed.poll_instead();
        }
    }

    /// Reads again the projects that changed, only those; true when one was read.
    fn reload(&mut self, o: &mut Overview) -> bool {
        let mut any = false;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if !(slot.changed || slot.rescan) {
                continue;
            }
            let Some(loader) = slot.loader.as_mut() else {
                continue;
            };
            let paths = std::mem::take(&mut slot.paths);
            let d = if slot.rescan {
                loader.full(Ts::now())
            } else {
                if let Some(f) = slot.feed.as_mut() {
                    f.saw_changes();
                }
                loader.changed(&paths, Ts::now())
            };
            (slot.changed, slot.rescan) = (false, false);
            if let Some(r) = outcome(d) {
                o.loaded(i, r);
            }
            any = true;
        }
        any
    }

    fn effect(
        &mut self,
        fx: Effect,
        t: &mut term::Term,
        rx: &mpsc::Receiver<Msg>,
        o: &mut Overview,
    ) -> Result<()> {
        match fx {
            Effect::Quit => o.quit = true,
            Effect::Reload => {
                for i in 0..self.slots.len() {
                    if self.slots[i].loader.is_none() {
                        self.open(i, o);
                    }
                    self.slots[i].rescan = true;
                }
                o.say("reading every project again", false);
            }
            Effect::Perform(i, a) => self.perform(i, &a, o),
            Effect::Open(i) => self.board(i, t, rx, o)?,
        }
        Ok(())
    }

    /// An owner action on project `i`, as the board performs it.
    fn perform(&mut self, i: usize, a: &actions::OwnerAct, o: &mut Overview) {
        let Some(slot) = self.slots.get_mut(i) else {
            return;
        };
        let Some(loader) = slot.loader.as_ref() else {
            return o.done(i, a.gate(), Err("the project is not open".into()));
        };
        let r = actions::act(loader.store(), &mut o.rows[i].owner, a, Ts::now());
        o.done(i, a.gate(), r);
        slot.rescan = true;
    }

    /// Enter: project `i`'s board in this terminal, until Esc (back here) or `q` (quit).
    fn board(
        &mut self,
        i: usize,
        t: &mut term::Term,
        rx: &mpsc::Receiver<Msg>,
        o: &mut Overview,
    ) -> Result<()> {
        let slot = &mut self.slots[i];
        let Some(loader) = slot.loader.as_mut() else {
            return Ok(());
        };
        let (mut app, pending) = crate::board::start(loader, self.opts)?;
        app.nested = true;
        app.live = o.rows[i].live.clone();
        app.message = Some(crate::board::app::Message {
            text: "Esc: back to all projects".into(),
            error: false,
            at: app.now,
        });
        let mut others: Vec<(usize, Signal)> = Vec::new();
        let mut deaf = crate::store::live::Silent;
        let feed: &mut dyn Feed = match slot.feed.as_mut() {
            Some(f) => f.as_mut(),
            None => &mut deaf,
        };
        let mut screen = Screen { term: t, rx };
        let mut note = |j: usize, s: Signal| others.push((j, s));
        let leave = crate::board::board_loop_among(
            &mut screen,
            loader,
            &mut app,
            pending,
            feed,
            self.opts,
            i,
            &mut note,
        )?;
        o.rows[i].owner = app.owner.clone();
        slot.rescan = true;
        for (j, s) in others {
            self.signal(j, s, o);
        }
        if leave == Leave::Quit {
            o.quit = true;
        }
        Ok(())
    }
}
