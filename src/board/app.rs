//! The board's state and its reactions to keys, mouse, ticks and loads: no I/O here.

use std::collections::{BTreeMap, BTreeSet};

use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use crate::board::data::{Delta, DoneItem, JOURNAL_FILE};
use crate::board::derive::{self, Columns};
pub use crate::board::dialogs::chart::MetricChart;
pub use crate::board::dialogs::confirm::Confirm;
pub use crate::board::dialogs::detail::Detail;
pub use crate::board::dialogs::errors::FileErrors;
pub use crate::board::dialogs::help::Help;
pub use crate::board::dialogs::input::{Drafts, TextInput};
pub use crate::board::dialogs::pair::{Pair, PairNews};
pub use crate::board::dialogs::picker::{AgentPick, PickFor, Picker};
pub use crate::board::dialogs::reply::PairAsk;
use crate::board::dialogs::reply::Reply;
pub use crate::board::dialogs::roster::{Candidate, Roster};
use crate::board::keymap::{self, Intent, Scope};
use crate::board::layout;
use crate::board::metrics::Metrics;
pub use crate::board::panes::Pane;
use crate::board::panes::Scene;
use crate::board::panes::activity::ActivityPane;
use crate::board::panes::evidence::EvidencePane;
use crate::board::panes::gates::GatesPane;
pub use crate::board::panes::keys::InputFor;
use crate::board::panes::keys::{OnScreen, Outcome};
pub use crate::board::panes::status::{Following, Message};
use crate::board::panes::todos::TodosPane;
use crate::board::theme::Theme;
use crate::flows::owner::{Owner, OwnerAct};
mod act;
mod fit;
mod input;
mod mode;
mod modes;
mod mouse;
mod pair;
mod tools;
mod triage;
pub use mode::Mode;

pub use crate::board::derive::sort::{self, SortBy};
pub use crate::board::panes::text::{ago, countdown, hhmm, split_priority, why_text, why_text_at};

use crate::kernel::{Event, Evidence, GateStatus, GoalStatus, Problem, Snapshot, Ts};

/// How long a status message stays.
const MESSAGE_MS: i64 = 15_000;

/// The most characters of the filter.
const FILTER_MAX: usize = 200;

/// Something the board asks its loop to do (the loop does the I/O).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Perform an owner action through the store.
    Perform(OwnerAct),
    /// Read a todo's evidence.
    LoadEvidence(String),
    /// Read everything again.
    Reload,
    /// Leave.
    Quit,
    /// Suspend the process (Ctrl-Z).
    Suspend,
    /// Ring the terminal bell (a new pending gate).
    Bell,
    /// Set the window title (the pending count).
    Title(String),
    /// Copy this text to the terminal's clipboard (OSC 52).
    Copy(String),
    /// Open this file (relative to the project) in `$EDITOR`, then reload.
    Edit(String),
    /// Run a step of pairing a phone through the device flows.
    Pair(PairAsk),
}

/// What the board reacts to.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // a load is moved once into the app; boxing buys nothing
pub enum AppEvent {
    /// A key.
    Key(KeyEvent),
    /// The mouse.
    Mouse(MouseEvent),
    /// The terminal's new size.
    Resize(u16, u16),
    /// The clock ticked.
    Tick(Ts),
    /// A load finished.
    Loaded(Delta),
    /// A todo's evidence was read.
    Evidence(String, Result<Vec<Evidence>, Problem>),
    /// An owner action finished: a line for the status bar, or the error.
    ActDone(Result<String, String>),
    /// The way changes arrive changed.
    Following(Following),
    /// Text pasted (bracketed paste): text for an input, never keys.
    Paste(String),
    /// What a step of pairing a phone brought.
    Pair(PairNews),
}

/// The board's whole state.
#[derive(Debug, Clone)]
pub struct App {
    /// The project shown (its root).
    pub project: String,
    /// The colors.
    pub theme: Theme,
    /// Changes are off.
    pub readonly: bool,
    /// Who acts.
    pub owner: Owner,
    /// The clock.
    pub now: Ts,
    /// The terminal's size.
    pub size: (u16, u16),
    /// The last good state (None until a first good load).
    pub snap: Option<Snapshot>,
    /// The journal's tail, newest last.
    pub journal: Vec<Event>,
    /// Recently done todos, newest first.
    pub done: Vec<DoneItem>,
    /// Files that failed to load, by file.
    pub problems: BTreeMap<String, Problem>,
    /// When the last load happened.
    pub last_reload: Option<Ts>,
    /// Events or polling.
    pub following: Following,
    /// The mode.
    pub mode: Mode,
    /// The focused pane.
    pub focus: Pane,
    /// The filter text.
    pub filter: String,
    /// The status message.
    pub message: Option<Message>,
    /// The columns as of the last derive.
    pub columns: Columns,
    /// The gates pane.
    pub gates: GatesPane,
    /// The todos pane.
    pub todos: TodosPane,
    /// The evidence pane.
    pub evidence: EvidencePane,
    /// The goal's metric points (the newest), for the chart and the headline.
    pub metrics: Metrics,
    /// The activity pane.
    pub activity: ActivityPane,
    /// Set when the board should stop.
    pub quit: bool,
    /// Opened from the overview (`board --all`): Esc goes back to it.
    pub nested: bool,
    /// Set when a board opened from the overview should go back to it.
    pub back: bool,
    /// The bell and window title last given.
    pub attention: crate::board::notify::Attention,
    /// How the todo columns are sorted.
    pub sort: SortBy,
    /// Clock times (UTC) instead of relative ones.
    pub absolute: bool,
    /// Text typed and dismissed, by gate and purpose, offered again when the input reopens.
    pub drafts: Drafts,
    /// Gate decisions asked of the store that the loads do not show yet.
    decisions: triage::Decisions,
    /// Where the pairing files are (resolved once at start; `None`: HOME is not set).
    pub pair_dir: Option<std::path::PathBuf>,
}

impl App {
    /// A board with nothing loaded yet.
    pub fn new(project: impl Into<String>, theme: Theme, readonly: bool, now: Ts) -> App {
        App {
            project: project.into(),
            theme,
            readonly,
            owner: Owner::unverified(),
            now,
            size: (80, 24),
            snap: None,
            journal: Vec::new(),
            done: Vec::new(),
            problems: BTreeMap::new(),
            last_reload: None,
            following: Following::Events,
            mode: Mode::Normal,
            focus: Pane::Gates,
            filter: String::new(),
            message: None,
            columns: Columns::default(),
            gates: GatesPane::default(),
            todos: TodosPane::default(),
            evidence: EvidencePane::default(),
            metrics: Metrics::default(),
            activity: ActivityPane::default(),
            quit: false,
            nested: false,
            back: false,
            attention: Default::default(),
            sort: SortBy::default(),
            absolute: false,
            drafts: Drafts::default(),
            decisions: triage::Decisions::default(),
            pair_dir: None,
        }
    }

    /// Reacts to one event; returns what the loop should do.
    pub fn on_event(&mut self, ev: AppEvent) -> Vec<Effect> {
        match ev {
            AppEvent::Key(k) => self.on_key(k),
            AppEvent::Mouse(m) => self.on_mouse(m),
            AppEvent::Resize(w, h) => {
                self.size = (w, h);
                Vec::new()
            }
            AppEvent::Tick(now) => self.on_tick(now),
            AppEvent::Loaded(d) => self.apply(d),
            AppEvent::Evidence(id, r) => {
                if self.selected_todo().as_deref() == Some(id.as_str()) {
                    self.evidence.shown = Some((id, r));
                }
                Vec::new()
            }
            AppEvent::ActDone(r) => {
                match r {
                    Ok(t) => {
                        self.decisions.performing = None;
                        self.say(t, false)
                    }
                    Err(e) => {
                        self.undecided();
                        self.say(e, true)
                    }
                }
                Vec::new()
            }
            AppEvent::Pair(news) => self.on_pair_news(news),
            AppEvent::Paste(text) => {
                self.on_paste(&text);
                Vec::new()
            }
            AppEvent::Following(l) => {
                match &l {
                    Following::Polling(why) => self.say(format!("polling: {why}"), false),
                    Following::Reconnecting(why) => {
                        self.say(format!("lost the database, reconnecting: {why}"), true)
                    }
                    Following::Events if matches!(self.following, Following::Reconnecting(_)) => {
                        self.say("reconnected to the database", false)
                    }
                    Following::Events => {}
                }
                self.following = l;
                Vec::new()
            }
        }
    }

    fn say(&mut self, text: impl Into<String>, error: bool) {
        self.message = Some(Message {
            text: text.into(),
            error,
            at: self.now,
        });
    }

    fn on_tick(&mut self, now: Ts) -> Vec<Effect> {
        self.now = now;
        if self
            .message
            .as_ref()
            .is_some_and(|m| !m.error && now.since(m.at).0 > MESSAGE_MS)
        {
            self.message = None;
        }
        if self.columns.next_change.is_some_and(|t| t <= now) {
            self.derive();
        }
        self.pair_tick(now)
    }

    /// Applies a load: a new state, or the problem of a load that failed (the last good state
    /// stays on screen with it).
    pub fn apply(&mut self, d: Delta) -> Vec<Effect> {
        self.now = self.now.max(d.at);
        self.last_reload = Some(d.at);
        if d.full.is_some() {
            self.problems.retain(|f, _| f == JOURNAL_FILE);
        }
        if d.journal.is_some() {
            self.problems.remove(JOURNAL_FILE);
        }
        for p in d.problems {
            self.problems.insert(p.file.clone(), p);
        }
        if let Some(full) = d.full {
            self.snap = Some(full);
        }
        if let Some(j) = d.journal {
            self.journal = j;
        }
        if let Some(done) = d.done {
            self.done = done;
        }
        if let Some(m) = d.metrics {
            self.metrics.apply(m);
        }
        self.derive();
        self.clamp_errors();
        let mut fx = Vec::new();
        if let Some(snap) = &self.snap {
            let ring = self.attention.update(snap);
            if ring.bell {
                fx.push(Effect::Bell);
            }
            fx.extend(ring.title.map(Effect::Title));
        }
        if let Some(id) = self.selected_todo()
            && (d.evidence_changed.contains(&id) || self.evidence.stale(&id))
        {
            fx.push(Effect::LoadEvidence(id));
        }
        fx
    }

    /// Recomputes the columns and the gate list, keeping selections on the same ids.
    pub fn derive(&mut self) {
        let Some(snap) = &self.snap else {
            return;
        };
        self.columns = derive::columns(snap, &self.done, self.now, &self.filter);
        sort::sort_columns(&mut self.columns, self.sort);
        self.gates.set(
            derive::gates(snap, &self.filter)
                .iter()
                .map(|g| g.id.clone())
                .collect(),
        );
        self.todos.set(&self.columns);
        self.settle_decisions();
    }

    /// The scopes whose keys apply now, in order.
    pub fn scopes(&self) -> Vec<Scope> {
        self.mode.scopes().unwrap_or_else(|| {
            keymap::board_scopes(match self.focus {
                Pane::Gates => Some(GatesPane::SCOPE),
                Pane::Todos => Some(TodosPane::SCOPE),
                Pane::Evidence | Pane::Activity => None,
            })
        })
    }

    /// Reacts to a key press (releases and repeats of other kinds are ignored).
    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if key.kind != KeyEventKind::Press {
            return Vec::new();
        }
        let scopes = self.scopes();
        let Some(intent) = keymap::lookup(&scopes, &key, false) else {
            self.on_text(key);
            return Vec::new();
        };
        if self.readonly
            && keymap::KEYMAP
                .iter()
                .any(|b| b.intent == intent && b.changes)
        {
            self.say("read-only board (--readonly): changes are off", true);
            return Vec::new();
        }
        if matches!(self.mode, Mode::Normal | Mode::Detail(_))
            && keymap::needs_owner(intent)
            && !self.owner.verified
        {
            let why = self.owner.note.trim_start_matches("owner: ").to_string();
            self.say(format!("only the owner can do this; {why}"), true);
            return Vec::new();
        }
        match intent {
            Intent::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            Intent::Suspend => vec![Effect::Suspend],
            _ => self.dispatch(intent),
        }
    }

    /// What the layout needs to know.
    pub fn layout_input(&self) -> layout::Input {
        let pending = self.snap.as_ref().map_or(0, |s| {
            s.gates
                .values()
                .filter(|g| g.effective_status() == GateStatus::Pending)
                .count()
        });
        layout::Input {
            gates: self.gates.ids.len(),
            pending,
            banner: crate::board::alerts::rows(&self.problems, self.snap.as_ref()),
            focus: self.focus,
            todos: layout::todo_needs(&self.columns, self.todos.col),
            status: layout::status_rows(
                self.message.as_ref().map(|m| m.text.as_str()),
                self.size.0,
            ),
            gate_rows: self.gate_rows(self.size.0.saturating_sub(2), self.size.1 / 2) as u16,
        }
    }

    /// What a frame shows of this state at its clock, for [`crate::board::draw::frame`].
    pub fn scene(&self) -> Scene<'_> {
        let gates = self
            .snap
            .as_ref()
            .map(|s| {
                self.gates
                    .ids
                    .iter()
                    .filter_map(|id| s.gates.get(id))
                    .collect()
            })
            .unwrap_or_default();
        Scene {
            now: self.now,
            theme: &self.theme,
            project: &self.project,
            snap: self.snap.as_ref(),
            columns: &self.columns,
            gates,
            gate_pane: &self.gates,
            todos: &self.todos,
            focus: self.focus,
            filtering: self.mode == Mode::Filter,
            overlay: self.mode.overlay(),
            filter: &self.filter,
            evidence: &self.evidence,
            metrics: &self.metrics,
            journal: &self.journal,
            activity: &self.activity,
            failed: &self.problems,
            message: self.message.as_ref(),
            following: &self.following,
            last_reload: self.last_reload,
            readonly: self.readonly,
            owner: &self.owner,
            hints: self.hints(),
            layout: self.layout_input(),
            sort: self.sort,
            absolute: self.absolute,
        }
    }
}
